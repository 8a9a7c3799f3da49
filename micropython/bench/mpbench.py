#!/usr/bin/env python3
"""Side-by-side GIL benchmarks of MicroPython builds, in one run.

    python3 micropython/bench/mpbench.py \\
        --mp gil=$MICROPY_GIL \\
        --mp 'classic=$MICROPY_RUSTGIL MICROPY_RUST_GIL=classic' \\
        --mp 'priority=$MICROPY_RUSTGIL MICROPY_RUST_GIL=priority' \\
        --mp nogil=$MICROPY_NOGIL \\
        [--scenarios cpu,echo,pingpong] [--threads 1,2,3,4] [--spinners 0,1,2]
        [--seconds 2] [--repeat 3] [--out results.md]

(micropython/build.sh prints the MICROPY_* paths.) Each --mp is NAME=BINARY
with optional VAR=VALUE words for its environment. Runs are interleaved:
every build once per round, the builds' order rotated each round; tables
give the median of the rounds and each build's ratio to the first one.

Scenarios:
  cpu       N MicroPython threads (each --threads value) count loop rounds
            for --seconds. Metrics: total rounds/s, and each thread's share of
            the rounds (the fairness table: 1/N each is fair).
  echo      the convoy experiment: the MicroPython process is an echo server
            (its main thread: recv(8192) / send back) beside S spinning
            threads (each --spinners value); this process sends 10 MB as 640
            messages of 16 KB over loopback TCP, TCP_NODELAY on both ends.
            Metric: seconds for the whole transfer.
  pingpong  the same server; 100-byte request, 100-byte reply, back to back
            for --seconds. Metrics: round trip p50, p99, p99.9 (microseconds)
            and round trips completed.
"""

import argparse
import math
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# The echo server, run by the MicroPython build under test.
SERVER = r'''
import socket, sys, _thread

def spin():
    x = 0
    while True:
        x += 1

for _ in range(int(sys.argv[2])):
    _thread.start_new_thread(spin, ())

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(socket.getaddrinfo("127.0.0.1", int(sys.argv[1]))[0][-1])
s.listen(1)
print("ready")
while True:
    c, _ = s.accept()
    c.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY
    while True:
        data = c.recv(8192)
        if not data:
            break
        view = memoryview(data)
        while len(view):
            n = c.send(view)
            view = view[n:]
    c.close()
'''

# N counting threads for a fixed time; prints the rounds each did and the
# seconds the main thread measured (from start to reading the counts).
CPU = r'''
import sys, time, _thread

n = int(sys.argv[1])
seconds = float(sys.argv[2])
counts = [0] * n
go = [False]
stop = [False]
started = [0]
lock = _thread.allocate_lock()

def count(i):
    with lock:
        started[0] += 1
    while not go[0]:
        time.sleep_ms(1)
    k = 0
    while not stop[0]:
        k += 1
        if k & 1023 == 0:
            counts[i] = k
    counts[i] = k

for i in range(n):
    _thread.start_new_thread(count, (i,))
while started[0] < n:
    time.sleep_ms(1)
t0 = time.ticks_us()
go[0] = True
time.sleep(seconds)
snap = list(counts)
elapsed = time.ticks_diff(time.ticks_us(), t0) / 1e6
stop[0] = True
print(" ".join(str(c) for c in snap), elapsed)
'''


class Build:
    def __init__(self, spec):
        name, _, rest = spec.partition("=")
        words = shlex.split(os.path.expandvars(rest))
        if not name or not words:
            raise SystemExit(f"--mp wants NAME=BINARY [VAR=VALUE...], not {spec!r}")
        self.name = name
        self.binary = words[0]
        self.env = dict(os.environ)
        for w in words[1:]:
            key, eq, value = w.partition("=")
            if not eq:
                raise SystemExit(f"--mp {spec!r}: {w!r} is not VAR=VALUE")
            self.env[key] = value
        if not os.access(self.binary, os.X_OK):
            raise SystemExit(f"--mp {spec!r}: {self.binary} is not an executable")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, build, spinners, script):
        self.port = free_port()
        self.proc = subprocess.Popen([build.binary, script, str(self.port), str(spinners)],
                                     env=build.env, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.close()
            raise RuntimeError(f"{build.name}: the server did not start ({line!r})")
        time.sleep(0.2)  # let the spinners get going

    def connect(self):
        c = socket.create_connection(("127.0.0.1", self.port))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return c

    def close(self):
        self.proc.kill()
        self.proc.wait()


def recv_exactly(c, n):
    while n > 0:
        data = c.recv(n)
        if not data:
            raise RuntimeError("server closed the connection")
        n -= len(data)


def echo(server, args):
    c = server.connect()
    msg = b"e" * 16384
    start = time.perf_counter()
    for _ in range(640):
        c.sendall(msg)
        recv_exactly(c, len(msg))
    elapsed = time.perf_counter() - start
    c.close()
    return {"seconds": elapsed}


def pingpong(server, args):
    c = server.connect()
    msg = b"p" * 100
    times = []
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        c.sendall(msg)
        recv_exactly(c, 100)
        times.append((time.perf_counter() - t0) * 1e6)
    c.close()
    times.sort()

    def pct(p):  # nearest rank: the smallest value with p % of them at or below it
        return times[max(0, math.ceil(p / 100 * len(times)) - 1)]

    return {"p50": pct(50), "p99": pct(99), "p99.9": pct(99.9), "round trips": len(times)}


def cpu(build, n, args, script):
    out = subprocess.run([build.binary, script, str(n), str(args.seconds)], env=build.env,
                         capture_output=True, text=True, timeout=args.seconds * 20 + 30)
    if out.returncode != 0:
        raise RuntimeError(f"{build.name}: cpu run failed: {out.stderr.strip()}")
    *counts, elapsed = out.stdout.split()
    counts = [int(c) for c in counts]
    total = sum(counts)
    shares = sorted((c / total if total else 0.0) for c in counts)
    return {"rounds/s": total / float(elapsed), "shares": shares}


def fmt(metric, v):
    if metric == "seconds":
        return f"{v:.3f}"
    if metric in ("rounds/s", "round trips"):
        return f"{v:,.0f}"
    return f"{v:,.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mp", action="append", required=True, help="NAME=BINARY [VAR=VALUE...]")
    ap.add_argument("--scenarios", default="cpu,echo,pingpong")
    ap.add_argument("--threads", default="1,2,3,4")
    ap.add_argument("--spinners", default="0,1,2")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    builds = [Build(s) for s in args.mp]
    scenarios = args.scenarios.split(",")
    for s in scenarios:
        if s not in ("cpu", "echo", "pingpong"):
            raise SystemExit(f"unknown scenario {s!r} (cpu, echo, pingpong)")
    threads = [int(x) for x in args.threads.split(",")]
    spinners = [int(x) for x in args.spinners.split(",")]

    tmp = tempfile.mkdtemp(prefix="mpbench-")
    server_py = os.path.join(tmp, "server.py")
    cpu_py = os.path.join(tmp, "cpu.py")
    with open(server_py, "w") as f:
        f.write(SERVER)
    with open(cpu_py, "w") as f:
        f.write(CPU)

    cells = []  # (scenario, n)
    for s in scenarios:
        for n in (threads if s == "cpu" else spinners):
            cells.append((s, n))
    results = {}  # (scenario, n, build) -> list of dicts
    for rnd in range(args.repeat):
        for s, n in cells:
            order = builds[rnd % len(builds):] + builds[:rnd % len(builds)]
            for b in order:
                if s == "cpu":
                    r = cpu(b, n, args, cpu_py)
                else:
                    server = Server(b, n, server_py)
                    try:
                        r = (echo if s == "echo" else pingpong)(server, args)
                    finally:
                        server.close()
                results.setdefault((s, n, b.name), []).append(r)
                print(f"round {rnd + 1}: {s} n={n} {b.name}: "
                      + ", ".join(f"{k}={v if k == 'shares' else fmt(k, v)}" for k, v in r.items()
                                  if k != "shares")
                      + (f", shares={' '.join(f'{x:.3f}' for x in r['shares'])}" if "shares" in r else ""),
                      file=sys.stderr, flush=True)

    lines = [f"`{' '.join(shlex.quote(a) for a in sys.argv)}`", "",
             f"{args.repeat} interleaved rounds; median of the rounds (min-max in brackets); "
             f"ratio to {builds[0].name}.", ""]
    metrics = {"cpu": ["rounds/s"], "echo": ["seconds"], "pingpong": ["p50", "p99", "p99.9", "round trips"]}
    for s in scenarios:
        what = "threads" if s == "cpu" else "spinners"
        for m in metrics[s]:
            lines.append(f"**{s}: {m}**" + (" (microseconds)" if s == "pingpong" and m != "round trips" else ""))
            lines.append("")
            lines.append(f"| {what} | " + " | ".join(b.name for b in builds) + " |")
            lines.append("|---|" + "---|" * len(builds))
            for n in (threads if s == "cpu" else spinners):
                row = []
                base = None
                for b in builds:
                    vals = [r[m] for r in results[(s, n, b.name)]]
                    med = statistics.median(vals)
                    if base is None:
                        base = med
                    ratio = f" ({med / base:.2g}x)" if b is not builds[0] and base else ""
                    row.append(f"{fmt(m, med)} [{fmt(m, min(vals))}-{fmt(m, max(vals))}]{ratio}")
                lines.append(f"| {n} | " + " | ".join(row) + " |")
            lines.append("")
        if s == "cpu":
            lines.append("**cpu: each thread's share of the rounds** (sorted, median per rank over the "
                         "rounds; fair = 1/N each; min share x N in brackets)")
            lines.append("")
            lines.append("| threads | " + " | ".join(b.name for b in builds) + " |")
            lines.append("|---|" + "---|" * len(builds))
            for n in threads:
                row = []
                for b in builds:
                    runs = [r["shares"] for r in results[(s, n, b.name)]]
                    per_rank = [statistics.median(run[i] for run in runs) for i in range(n)]
                    worst = min(min(run) for run in runs) * n
                    row.append(" / ".join(f"{x:.2f}" for x in per_rank) + f" [{worst:.2f}]")
                lines.append(f"| {n} | " + " | ".join(row) + " |")
            lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
