#!/usr/bin/env python3
"""A thread-per-connection or thread-pool Ruby server beside CPU-bound
threads, under wrk: stock Ruby against the lock's presets, side by side in
one run.

    python3 ruby/bench/server.py --ruby stock=PATH \\
        --ruby 'priority=PATH RUBY_RUST_GIL=priority' [--ruby ...] \\
        [--pool N] [--connections 10,50] [--spinners 0,1,2] [--seconds 5] [--rounds 3] \\
        [--no-processes] [--json OUT.json]

(ruby/bench/server.sh builds both Rubies and passes these.) The server is
ruby/bench/server.rb, run by each Ruby under test: stdlib TCPServer, one
thread per keep-alive connection, a little Ruby work per request and a
1 KiB response, beside 0-2 threads spinning in Ruby code. The client is
wrk in its own process (`wrk -t1 -cC`, one request of about 100 bytes in
flight per connection).

--pool N (issue 56): the server is a fixed pool of N worker threads instead
(gunicorn gthread's design, as cpython/bench/server.py --pool: a dispatcher
thread in IO.select hands readable connections to the workers through a
Queue, one request per turn; server.rb says more), with CPython's per-request
work (the header lines parsed into a Hash, a JSON document of 20 records
generated, about 1.3 KB: the response's body; about 60 us of CPU). The
connections default to 16, more than the workers.

Each run: the server starts, wrk opens every connection, and the wrk
script's delay() holds every request back until the server runs a thread
for each connection (stock Ruby takes seconds to accept 50 connections
beside a spinner; a pool: until it has accepted each); then --seconds of
load, then wrk is stopped with SIGINT. Requests/s is the server's own count
over that window; p50, p90, p99, p99.9 come from wrk (its Lua done(); wrk 4
corrects its histogram for
coordinated omission, so these are what an open-loop client would see).
"spinner laps/s" is the spinning threads' work over the window: what the
background work keeps.

"processes", in each cell with spinners (--no-processes leaves it out):
the first Ruby's server with no spinning thread, while as many processes
of that Ruby spin beside it (ruby/bench/echo.rb spin). They take the CPUs
as the spinning threads do but share no lock: what the server loses there
is the machine's, the limit for this machine.

Rounds: in each cell (connections x spinners) every Ruby runs once per
round, in an order rotated each round, so that each comparison is made
minutes apart at most. The table gives medians over the rounds and each
Ruby's ratio to the first one given (stock), then, per Ruby, the cells whose
p99 is within issue 14's bound max(3 x p50, p50 + 2 ms) (issue 56's
criterion). The machine's load average is read before every run and its
range printed.
"""
import argparse
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import giloptions

HERE = os.path.dirname(os.path.abspath(__file__))
WRK_TIMEOUT_S = 10
ACCEPT_LIMIT_S = 120
REQUEST_BYTES = 100

# wrk's script. The request: wrk's GET with an X-Pad header that brings it
# to REQUEST_BYTES. delay(): the first call blocks this wrk thread (no
# request sent yet) until the flag file exists, then 0. It sleeps with
# LuaJIT's ffi, not os.execute: system() in a wrk thread would leave SIGINT
# ignored. done(): the figures (µs), on one line.
WRK_LUA = r'''
local pad = REQUEST_BYTES - #("GET / HTTP/1.1\r\nHost: " .. wrk.host .. ":" .. wrk.port .. "\r\nX-Pad: \r\n\r\n")
wrk.headers["X-Pad"] = string.rep("x", math.max(pad, 1))
local flag = "FLAG"
local ready = false
local ffi = require("ffi")
ffi.cdef("int usleep(unsigned int usec);")
function delay()
  if not ready then
    while true do
      local f = io.open(flag, "r")
      if f then f:close() break end
      ffi.C.usleep(20000)
    end
    ready = true
  end
  return 0
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "SERVERBENCH requests=%d errors=%d timeouts=%d p50=%d p90=%d p99=%d p999=%d max=%d\n",
    summary.requests, e.connect + e.read + e.write + e.status + e.timeout, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max))
end
'''


class Ruby:
    """One --ruby NAME=PATH [ENV=VALUE ...] (NAME may hold '=', PATH not)."""

    def __init__(self, spec):
        words = shlex.split(spec)
        name, eq, path = words[0].rpartition("=") if words else ("", "", "")
        if not eq or not name or not path:
            raise argparse.ArgumentTypeError(f"--ruby wants NAME=PATH [ENV=VALUE ...], got {spec!r}")
        self.name, self.path = name, path
        self.spec = shlex.join([path] + words[1:])  # PATH [ENV=VALUE ...], for the report
        if not os.access(self.path, os.X_OK):
            raise argparse.ArgumentTypeError(f"--ruby {spec!r}: {self.path} is not an executable")
        self.env = dict(os.environ)
        self.env.pop("RUBY_RUST_GIL", None)
        for w in words[1:]:
            k, eq, v = w.partition("=")
            if not eq:
                raise argparse.ArgumentTypeError(f"--ruby {spec!r}: {w!r} is not ENV=VALUE")
            self.env[k] = v


class Server:
    def __init__(self, ruby, spinners, workers):
        self.name = ruby.name
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([ruby.path, os.path.join(HERE, "server.rb"), str(spinners), str(workers)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     env=ruby.env, text=True, bufsize=1)
        self.port = int(self._line()["port"])

    def _line(self):
        line = self.proc.stdout.readline()
        if not line:
            self.err.seek(0)
            raise RuntimeError(f"{self.name}: the server exited (status {self.proc.poll()}):\n"
                               f"{self.err.read()[-3000:]}")
        return dict(w.split("=", 1) for w in line.split())

    def snap(self):
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return {k: float(v) for k, v in self._line().items()}

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.err.close()


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def one_run(ruby, conns, spinners, workers, seconds, wrk_path, as_processes=False):
    """One run; as_processes: the spinners as separate processes of ruby
    (the server then has none)."""
    procs = [subprocess.Popen([ruby.path, os.path.join(HERE, "echo.rb"), "spin"], env=ruby.env)
             for _ in range(spinners if as_processes else 0)]
    try:
        return _one_run(ruby, conns, 0 if as_processes else spinners, workers, seconds, wrk_path,
                        "processes" if as_processes else ruby.name, spinners)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _one_run(ruby, conns, spinners, workers, seconds, wrk_path, name, cell_spinners):
    server = Server(ruby, spinners, workers)
    flag = tempfile.mktemp(prefix="rubyserver-go-")
    lua = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    lua.write(WRK_LUA.replace("REQUEST_BYTES", str(REQUEST_BYTES)).replace("FLAG", flag))
    lua.close()
    wrk = None
    try:
        rec = {"ruby": name, "connections": conns, "spinners": cell_spinners, "load": loadavg()}
        time.sleep(0.2)  # the spinners going
        start = server.snap()
        cmd = [wrk_path, "-t1", f"-c{conns}", f"-d{seconds + ACCEPT_LIMIT_S + 30}s",
               "--timeout", f"{WRK_TIMEOUT_S}s", "-s", lua.name, f"http://127.0.0.1:{server.port}/"]
        t_start = time.monotonic()
        wrk = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while True:  # warm-up: a thread running for every connection
            s = server.snap()
            if s["handlers"] - start["handlers"] >= conns:
                break
            if time.monotonic() - t_start > ACCEPT_LIMIT_S or wrk.poll() is not None:
                raise RuntimeError(f"{ruby.name}: {int(s['handlers'])} of {conns} connections "
                                   f"running after {time.monotonic() - t_start:.0f} s")
            time.sleep(0.02)
        rec["accept_s"] = s["t"] - start["t"]
        time.sleep(0.1)  # the last threads reach their first read
        before = server.snap()
        open(flag, "w").close()
        time.sleep(seconds)
        after = server.snap()
        wrk.send_signal(signal.SIGINT)
        try:
            out, _ = wrk.communicate(timeout=8)
        except subprocess.TimeoutExpired:
            # The signal reached a worker thread, not wrk's main thread.
            wrk.send_signal(signal.SIGINT)
            out, _ = wrk.communicate(timeout=WRK_TIMEOUT_S + 5)
        line = next((l for l in out.splitlines() if l.startswith("SERVERBENCH")), None)
        if wrk.returncode != 0 or line is None:
            raise RuntimeError(f"{ruby.name}: wrk failed ({wrk.returncode}): {' '.join(cmd)}\n{out}")
        w = {k: float(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
        window = after["t"] - before["t"]
        rec.update(rps=(after["served"] - before["served"]) / window,
                   spin=(after["spin"] - before["spin"]) / window,
                   requests=after["served"] - before["served"],
                   req_bytes=after["req_bytes"], handler_errors=after["errors"],
                   p50=w["p50"], p90=w["p90"], p99=w["p99"], p999=w["p999"], max=w["max"],
                   wrk_errors=w["errors"], timeouts=w["timeouts"])
        return rec
    finally:
        if wrk is not None and wrk.poll() is None:
            wrk.kill()
            wrk.wait()
        server.close()
        for p in (flag, lua.name):
            if os.path.exists(p):
                os.unlink(p)


def fmt_ms(us):
    ms = us / 1000
    return f"{ms:.2f}" if ms < 10 else f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}"


def fmt_ratio(x):
    return f"{x:.0f}x" if x >= 10 else f"{x:.2f}x" if x >= 0.1 else f"{x:.3f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--ruby", action="append", type=Ruby, required=True,
                    help="NAME=PATH [ENV=VALUE ...]; the first is the baseline of the ratios")
    ap.add_argument("--pool", type=int, default=0, metavar="N",
                    help="a pool of N worker threads instead of a thread per connection (default 0)")
    ap.add_argument("--connections", help="default 10,50; with --pool, 16")
    ap.add_argument("--spinners", default="0,1,2")
    ap.add_argument("--seconds", type=int, default=5, help="load per run (default 5)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-processes", action="store_true", help="leave out the processes control")
    ap.add_argument("--wrk", default=shutil.which("wrk") or "wrk")
    ap.add_argument("--json", help="write every run's figures here")
    a = ap.parse_args()
    if a.connections is None:
        a.connections = "16" if a.pool else "10,50"
    try:
        conns = [int(x) for x in a.connections.split(",")]
        spins = [int(x) for x in a.spinners.split(",")]
    except ValueError:
        sys.exit(f"server.py: --connections and --spinners want numbers separated by commas, "
                 f"got {a.connections!r} and {a.spinners!r}")
    if a.rounds < 1 or a.seconds < 1 or min(conns) < 1 or min(spins) < 0 or a.pool < 0:
        sys.exit(f"server.py: --rounds, --seconds and --connections at least 1, --spinners and --pool "
                 f"at least 0; got --rounds {a.rounds} --seconds {a.seconds} --connections {a.connections} "
                 f"--spinners {a.spinners} --pool {a.pool}")
    if not shutil.which(a.wrk):
        sys.exit("server.py: wrk not found (Debian: apt-get install wrk)")
    rubies = a.ruby
    try:
        described = {ruby.name: giloptions.describe(ruby.path, ruby.env) for ruby in rubies}
    except RuntimeError as e:
        sys.exit(f"server.py: {e}")
    t0 = time.time()
    runs = []
    for c in conns:
        for s in spins:
            # (ruby, spinners as processes)
            variants = [(ruby, False) for ruby in rubies]
            if s and not a.no_processes:
                variants.append((rubies[0], True))
            for r in range(a.rounds):
                k = r % len(variants)
                for ruby, as_procs in variants[k:] + variants[:k]:
                    name = "processes" if as_procs else ruby.name
                    print(f"c={c} spinners={s} round {r + 1}/{a.rounds}: {name}", file=sys.stderr, flush=True)
                    runs.append(one_run(ruby, c, s, a.pool, a.seconds, a.wrk, as_procs))
    t1 = time.time()
    if a.json:
        import json
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)

    bad = [r for r in runs if r["requests"] <= 0 or r["wrk_errors"] or r["handler_errors"]]
    med = statistics.median
    loads = [r["load"] for r in runs]
    kind = (f"thread-pool server ({a.pool} workers, gunicorn gthread's design)" if a.pool
            else "thread-per-connection server")
    print(f"Ruby {kind} under wrk, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(t0))}-{time.strftime('%H:%M UTC', time.gmtime(t1))}, "
          f"load average {min(loads):.1f}-{max(loads):.1f}; {a.rounds} rounds of {a.seconds} s, medians; "
          f"request {int(runs[0]['req_bytes'])} bytes, response "
          + ("a 1.3 KB JSON document" if a.pool else "1 KiB") + " + headers; "
          f"(x) = ratio to {rubies[0].name}\n")
    for ruby in rubies:
        print(f"- `{ruby.name}`: `{ruby.spec}`: {described[ruby.name]}")
    print()
    print("| conns | spinners | ruby | requests/s | p50 ms | p90 ms | p99 ms | p99.9 ms | spinner laps/s | accept s |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in conns:
        for s in spins:
            names = [ruby.name for ruby in rubies] + (["processes"] if s and not a.no_processes else [])
            cell = {n: [r for r in runs if r["ruby"] == n and r["connections"] == c and r["spinners"] == s]
                    for n in names}
            base = cell[names[0]]
            for n in names:
                rs = cell[n]
                row = [str(c), str(s), n]
                for key, f in (("rps", lambda v: f"{v:.0f}"), ("p50", fmt_ms), ("p90", fmt_ms), ("p99", fmt_ms),
                               ("p999", fmt_ms)):
                    v = med([r[key] for r in rs])
                    b = med([r[key] for r in base])
                    row.append(f(v) if n == names[0] or not b else f"{f(v)} ({fmt_ratio(v / b)})")
                row.append(f"{med([r['spin'] for r in rs]) / 1e3:.0f}k" if s and n != "processes" else "-")
                row.append(f"{med([r['accept_s'] for r in rs]):.2f}")
                print("| " + " | ".join(row) + " |")
    print("\np99 <= max(3 x p50, p50 + 2 ms) (issue 14's bound; medians of the same cell):\n")
    for n in [ruby.name for ruby in rubies] + (["processes"] if any(spins) and not a.no_processes else []):
        cells, above = 0, []
        for c in conns:
            for s in spins:
                rs = [r for r in runs if r["ruby"] == n and r["connections"] == c and r["spinners"] == s]
                if not rs:
                    continue
                cells += 1
                p50, p99 = med([r["p50"] for r in rs]), med([r["p99"] for r in rs])
                bound = max(3 * p50, p50 + 2000)
                if p99 > bound:
                    above.append(f"c={c} s={s} (p99 {fmt_ms(p99)} ms, bound {fmt_ms(bound)} ms)")
        print(f"- {n}: within it in {cells - len(above)} of {cells} cells"
              + (f"; above: {', '.join(above)}" if above else ""))
    print(f"\n{len(runs)} runs, {sum(int(r['requests']) for r in runs)} requests; "
          f"runs with errors or no request: {len(bad)}")
    if bad:
        for r in bad:
            print(f"  {r['ruby']} c={r['connections']} s={r['spinners']}: requests={r['requests']:.0f} "
                  f"wrk_errors={r['wrk_errors']:.0f} handler_errors={r['handler_errors']:.0f}")
        sys.exit(1)


if __name__ == "__main__":
    main()
