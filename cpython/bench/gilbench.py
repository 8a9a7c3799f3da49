#!/usr/bin/env python3
"""Side-by-side GIL benchmarks of CPython interpreters, in one run.

    python3 cpython/bench/gilbench.py \\
        --python stock=$STOCK_PYTHON \\
        --python rustgil=$RUSTGIL_PYTHON [--python 'rustgil-x=$RUSTGIL_PYTHON PYTHON_RUST_GIL=x'] \\
        [--spinners 0,1,2] [--repeat 3] [--scenarios echo,pingpong] [--out results.md]
        [--control NAME | --no-control]

Each interpreter runs the *server* process, which also runs N spinning
threads (`while True: pass`); the client runs in this process (any Python 3).
Runs are interleaved (every interpreter once per round), and the table gives
the median of the rounds and each interpreter's ratio to the first one.

The control, "processes": the same server with no spinning thread, beside N
spinning *processes* of the same interpreter (--control NAME, default the
first). They share the CPUs but no lock: what an I/O thread loses there is
the machine's (the OS scheduler's share), the limit for this machine. The
table gives each interpreter's ratio to it too (not for cpu and select,
which have no I/O thread).

Scenarios (N = each --spinners value: spinning threads in the server):
  echo      the convoy-effect report's experiment: 10 MB sent as 640 messages
            of 16 KB over loopback TCP, TCP_NODELAY on both ends; the server
            loops recv(8192) / sendall. Metric: seconds for the whole transfer.
  pingpong, pingpong99
            100-byte request, 100-byte reply, back to back, for --seconds.
            Metric: median / p99 round trip in microseconds (one run gives
            both: pingpong99 reads the run pingpong made in the same round).
  asyncio1, asyncio10
            an asyncio echo server (plus N spinners); 1 or 10 client threads
            send 100-byte requests back to back for --seconds. Metric: req/s.
  udpmean, udpp99
            UDP datagrams carrying their send time (CLOCK_MONOTONIC) to the
            server's main thread, one per 5 ms for --seconds. Metric: mean / p99
            delivery latency in microseconds.
  cpu       N pure-Python threads (N=max(spinners,1)) count loop rounds for
            --seconds. Metric: total rounds/s (compare N=1 with N=2..4).
  select    select.select([], [], [], 0) in a loop, one thread: a release and
            re-acquire per call. Metric: ns per call.
"""

import argparse
import contextlib
import os
import shlex
import socket
import statistics
import subprocess
import sys
import time

import giloptions

SERVER = r'''
import socket, sys, threading

def spin():
    while True:
        pass

for _ in range(int(sys.argv[1])):
    threading.Thread(target=spin, daemon=True).start()

s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        data = c.recv(8192)
        if not data:
            break
        c.sendall(data)
    c.close()
'''


ASYNCIO_SERVER = r'''
import asyncio, socket, sys, threading

def spin():
    while True:
        pass

for _ in range(int(sys.argv[1])):
    threading.Thread(target=spin, daemon=True).start()

async def handle(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        data = await reader.read(100)
        if not data:
            break
        writer.write(data)
        await writer.drain()
    writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
'''

UDP_SERVER = r'''
import socket, sys, threading, time

def spin():
    while True:
        pass

for _ in range(int(sys.argv[1])):
    threading.Thread(target=spin, daemon=True).start()

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
lat = []
answer = b"nan nan 0"
while True:
    data, addr = s.recvfrom(64)
    now = time.monotonic_ns()
    if data == b"done":
        # The client repeats "done" until it hears back (a datagram can be
        # lost when a backlog fills the socket buffer): answer every one.
        if lat:
            lat.sort()
            mean = sum(lat) / len(lat)
            p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
            answer = f"{mean / 1e3:.1f} {p99 / 1e3:.1f} {len(lat)}".encode()
            lat = []
        s.sendto(answer, addr)
        continue
    lat.append(now - int(data))
'''

CPU_PROBE = r'''
import sys, threading, time
n, seconds = int(sys.argv[1]), float(sys.argv[2])
counts = [0] * n
stop = False
def work(i):
    c = 0
    while not stop:
        for _ in range(1000):
            pass
        c += 1
    counts[i] = c
ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
for t in ts: t.start()
time.sleep(seconds)
stop = True
for t in ts: t.join()
print(sum(counts) / seconds)
'''

SELECT_PROBE = r'''
import select, time
n = 200_000
t = time.perf_counter()
for _ in range(n):
    select.select([], [], [], 0)
print((time.perf_counter() - t) / n * 1e9)
'''


class Interpreter:
    def __init__(self, spec):
        name, sep, rest = spec.partition("=")
        if not sep or not rest:
            raise argparse.ArgumentTypeError(f"--python wants NAME=PATH [ENV=VALUE ...], got {spec!r}")
        words = shlex.split(rest)
        self.name, self.path = name, words[0]
        self.env = dict(os.environ)
        for w in words[1:]:
            key, eq, value = w.partition("=")
            if not eq:
                raise argparse.ArgumentTypeError(f"{spec!r}: {w!r} is not ENV=VALUE")
            self.env[key] = value
        if not os.access(self.path, os.X_OK):
            raise argparse.ArgumentTypeError(f"{self.path}: not an executable")


class Server:
    def __init__(self, interp, spinners, code=SERVER):
        self.proc = subprocess.Popen([interp.path, "-c", code, str(spinners)], stdout=subprocess.PIPE,
                                     env=interp.env, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError(f"{interp.name}: the server did not start")
        self.port = int(line)
        time.sleep(0.2)  # let the spinners get going

    def connect(self):
        c = socket.create_connection(("127.0.0.1", self.port))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return c

    def close(self):
        self.proc.kill()
        self.proc.wait()


def echo_transfer(c):
    """The echo's 640 messages of 16 KB over the connected socket C, each
    read back whole: (seconds for all of them, seconds for the slowest)."""
    msg = b"x" * 16384
    slowest = 0.0
    start = time.perf_counter()
    for _ in range(640):
        t0 = time.perf_counter()
        c.sendall(msg)
        left = len(msg)
        while left > 0:
            data = c.recv(left)
            if not data:
                raise RuntimeError("server closed the connection")
            left -= len(data)
        slowest = max(slowest, time.perf_counter() - t0)
    return time.perf_counter() - start, slowest


def echo(server, args):
    c = server.connect()
    try:
        return echo_transfer(c)[0]
    finally:
        c.close()


def pingpong_times(server, args):
    """The round trips of one ping-pong run, in seconds."""
    msg = b"p" * 100
    c = server.connect()
    times = []
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        c.sendall(msg)
        left = 100
        while left > 0:
            data = c.recv(left)
            if not data:
                raise RuntimeError("server closed the connection")
            left -= len(data)
        times.append(time.perf_counter() - t0)
    c.close()
    return times


def asyncio_rps(interp, n, args, clients):
    server = Server(interp, n, ASYNCIO_SERVER)
    try:
        import threading
        counts = [0] * clients
        end = time.perf_counter() + args.seconds

        def client(i):
            c = server.connect()
            msg = b"r" * 100
            while time.perf_counter() < end:
                c.sendall(msg)
                left = 100
                while left > 0:
                    data = c.recv(left)
                    if not data:
                        raise RuntimeError("server closed the connection")
                    left -= len(data)
                counts[i] += 1
            c.close()

        ts = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return sum(counts) / args.seconds
    finally:
        server.close()


def p99(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


_runs = {}


def per_round(interp, n, args, run):
    """`run(interp, n, args)` once per interpreter, spinner count and round,
    however many statistics of it are asked for: a second scenario reads
    the first one's run (udpp99 udpmean's, pingpong99 pingpong's)."""
    key = (run.__name__, interp.name, n, args.round)
    if key not in _runs:
        _runs[key] = run(interp, n, args)
    return _runs[key]


def pingpong_run(interp, n, args):
    server = Server(interp, n)
    try:
        times = pingpong_times(server, args)
    finally:
        server.close()
    return statistics.median(times) * 1e6, p99(times) * 1e6


def pingpong(interp, n, args, stat):
    median, tail = per_round(interp, n, args, pingpong_run)
    return median if stat == "median" else tail


def udp_run(interp, n, args):
    server = Server(interp, n, UDP_SERVER)
    try:
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        addr = ("127.0.0.1", server.port)
        end = time.perf_counter() + args.seconds
        sent = 0
        while time.perf_counter() < end:
            c.sendto(str(time.monotonic_ns()).encode(), addr)
            sent += 1
            time.sleep(0.005)
        # Under the convoy the server may still be draining its backlog,
        # and a full socket buffer drops datagrams ("done" too): repeat
        # it every second, for up to 5 minutes.
        c.settimeout(1)
        reply = None
        for _ in range(300):
            c.sendto(b"done", addr)
            try:
                reply = c.recv(64).split()
                break
            except TimeoutError:
                continue
        if reply is None:
            raise RuntimeError(f"{interp.name}: the UDP server did not answer in 5 minutes")
        mean, tail, got = float(reply[0]), float(reply[1]), int(reply[2])
        if got < sent:
            print(f"  udp: {interp.name}, {n} spinners: {sent - got} of {sent} pings lost "
                  "(the server's socket buffer overflowed); statistics of the rest", file=sys.stderr)
        return mean, tail
    finally:
        server.close()


def udp_ping(interp, n, args, stat):
    mean, tail = per_round(interp, n, args, udp_run)
    return mean if stat == "mean" else tail


@contextlib.contextmanager
def spinner_processes(interp, n):
    """N processes of INTERP spinning for as long as the block runs."""
    procs = [subprocess.Popen([interp.path, "-c", "while True: pass"], env=interp.env) for _ in range(n)]
    try:
        if procs:
            time.sleep(0.2)  # as long as a server's spinners get to start
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def probe(interp, code, *argv):
    out = subprocess.run([interp.path, "-c", code, *map(str, argv)], env=interp.env, capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{interp.name}: probe failed: {out.stderr}")
    return float(out.stdout)


# Scenarios that start their own processes: fn(interp, n, args) -> value.
PROCESS_SCENARIOS = {
    "pingpong": (lambda i, n, a: pingpong(i, n, a, "median"), "ping-pong 100 B, median RTT", "µs"),
    "pingpong99": (lambda i, n, a: pingpong(i, n, a, "p99"), "ping-pong 100 B, p99 RTT", "µs"),
    "asyncio1": (lambda i, n, a: asyncio_rps(i, n, a, 1), "asyncio echo, 1 client", "req/s"),
    "asyncio10": (lambda i, n, a: asyncio_rps(i, n, a, 10), "asyncio echo, 10 clients", "req/s"),
    "udpmean": (lambda i, n, a: udp_ping(i, n, a, "mean"), "UDP ping to main thread, mean", "µs"),
    "udpp99": (lambda i, n, a: udp_ping(i, n, a, "p99"), "UDP ping to main thread, p99", "µs"),
    "cpu": (lambda i, n, a: probe(i, CPU_PROBE, max(n, 1), a.seconds), "CPU work, N threads (N=spinners, 0 means 1)",
            "units/s"),
    "select": (lambda i, n, a: probe(i, SELECT_PROBE), "select([], [], [], 0), one thread", "ns/call"),
}

SCENARIOS = {
    "echo": (echo, "echo 10 MB / 16 KB", "s"),
}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", action="append", type=Interpreter, required=True, metavar="NAME=PATH")
    p.add_argument("--spinners", default="0,1,2")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--scenarios", default="echo,pingpong")
    p.add_argument("--seconds", type=float, default=2.0, help="duration of one ping-pong run")
    p.add_argument("--out", help="also write the table (Markdown) to this file")
    p.add_argument("--limit-out", metavar="FILE",
                   help="also write the cells with spinners as ratios over the processes control "
                        "(Markdown rows: scenario, spinners, the control's median, each interpreter's ratio)")
    p.add_argument("--control", metavar="NAME",
                   help="the interpreter whose server runs beside spinning processes (default: the first)")
    p.add_argument("--no-control", action="store_true", help="leave the processes control out")
    args = p.parse_args()
    try:
        spinners = [int(x) for x in args.spinners.split(",")]
    except ValueError:
        p.error("--spinners wants numbers separated by commas, e.g. 0,1,2")
    scenarios = args.scenarios.split(",")
    for s in scenarios:
        if s not in SCENARIOS and s not in PROCESS_SCENARIOS:
            p.error(f"unknown scenario {s!r}; known: {', '.join([*SCENARIOS, *PROCESS_SCENARIOS])}")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    names = [i.name for i in args.python]
    if len(set(names)) != len(names):
        p.error("two --python share a name")
    if args.no_control and args.control:
        p.error("--control and --no-control exclude each other")
    if args.no_control and args.limit_out:
        p.error("--limit-out needs the processes control (drop --no-control)")
    control = None
    if not args.no_control:
        if args.control is not None and args.control not in names:
            p.error(f"--control {args.control!r} names no --python (given: {', '.join(names)})")
        control = args.python[names.index(args.control) if args.control else 0]
    CONTROL = "processes"
    if CONTROL in names:
        p.error(f"--python {CONTROL!r}: that name is the control's")
    try:
        described = {i.name: giloptions.describe(i.path, i.env) for i in args.python}
    except RuntimeError as e:
        p.error(str(e))

    def measure(scen, interp, threads):
        if scen in PROCESS_SCENARIOS:
            return PROCESS_SCENARIOS[scen][0](interp, threads, args)
        server = Server(interp, threads)
        try:
            return SCENARIOS[scen][0](server, args)
        finally:
            server.close()

    results = {}  # (scenario, spinners, name) -> [values]
    for scen in scenarios:
        controlled = control is not None and scen not in ("cpu", "select")
        for n in spinners:
            for r in range(args.repeat):
                args.round = r
                runs = [(interp.name, interp, n, 0) for interp in args.python]
                if controlled and n > 0:
                    runs.append((CONTROL, control, 0, n))
                for name, interp, threads, procs in runs:
                    if procs:
                        # A fresh UDP run: not the cached one of 0 threads.
                        args.round = (r, "control", procs)
                    with spinner_processes(interp, procs):
                        v = measure(scen, interp, threads)
                    args.round = r
                    results.setdefault((scen, n, name), []).append(v)
                    print(f"  {scen:9} spinners={n} round {r + 1}: {name:12} {v:10.3f}", file=sys.stderr,
                          flush=True)

    base = names[0]
    shown = names + ([CONTROL] if control is not None else [])
    over = [(name, base) for name in names[1:]] + [(name, CONTROL) for name in names if control is not None]
    cols = ["scenario", "spinners"] + [f"{n} (median)" for n in shown] + [f"{a} / {b}" for a, b in over]
    lines = ["| " + " | ".join(cols) + " |", "|---|---:|" + "---:|" * (len(cols) - 2)]
    for scen in scenarios:
        label, unit = (SCENARIOS.get(scen) or PROCESS_SCENARIOS[scen])[1:3]
        for n in spinners:
            if scen == "select" and n != spinners[0]:
                continue  # one thread: the spinner count does not apply
            med = {name: statistics.median(vs) for (sc, k, name), vs in results.items() if sc == scen and k == n}
            cells = [label, str(n)]
            cells += ["-" if name not in med else f"{med[name]:.3f} {unit}" if unit == "s"
                      else f"{med[name]:.0f} {unit}" for name in shown]
            cells += [f"{med[a] / med[b]:.2f}x" if a in med and b in med else "-" for a, b in over]
            lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    if args.limit_out:
        write_limit_rows(args.limit_out, scenarios, spinners, results, names, CONTROL)
    header = (f"{args.repeat} rounds, medians; command: {' '.join(shlex.quote(a) for a in sys.argv)}\n"
              f"machine: {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}\n"
              + "".join(f"{n}: {d}\n" for n, d in described.items()))
    print(header)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(header + "\n" + table + "\n")


def write_limit_rows(path, scenarios, spinners, results, names, control):
    """Markdown rows, one per cell with spinners: the control's median and
    every interpreter's median over it (1.00x: no worse than the same work
    in other processes). Rows only: a caller gathers several parts under
    one header."""
    rows = []
    for scen in scenarios:
        if scen in ("cpu", "select"):
            continue  # no I/O thread, no control
        label, unit = (SCENARIOS.get(scen) or PROCESS_SCENARIOS[scen])[1:3]
        better = "higher" if unit.endswith("/s") else "lower"
        for n in spinners:
            if n == 0:
                continue
            med = {name: statistics.median(vs) for (sc, k, name), vs in results.items() if sc == scen and k == n}
            limit = med[control]
            shown = f"{limit:.3f} {unit}" if unit == "s" else f"{limit:.0f} {unit}"
            cells = [f"{label} ({better} is better)", str(n), shown]
            cells += [f"{med[name] / limit:.2f}x" for name in names]
            rows.append("| " + " | ".join(cells) + " |")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
