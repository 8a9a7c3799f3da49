#!/usr/bin/env python3
"""Thread-per-connection (issue 14) or thread-pool (issue 56, --pool) HTTP
server under load, side by side.

    python3 cpython/bench/server.py \\
        --python stock=$STOCK_PYTHON \\
        --python 'priority=$RUSTGIL_PYTHON PYTHON_RUST_GIL=priority' [...] \\
        [--pool N] [--connections 1,10,50,200] [--spinners 0,1,2] [--seconds 5] [--repeat 3] \\
        [--out report.md] [--json raw.json] [--diag] [--trace-dir DIR] [--no-warmup] \\
        [--spinner-sched other|batch|idle] [--external-spinners N]
        [--control NAME | --no-control]

The server, run by each interpreter under test in a child process, is the
standard library's http.server.ThreadingHTTPServer (one thread per
connection): HTTP/1.1 keep-alive (protocol_version = "HTTP/1.1"), Nagle off
on accepted sockets (disable_nagle_algorithm), a 16-byte GET response with
Content-Length, no logging, a listen backlog of 1024 (request_queue_size;
the kernel caps it at net.core.somaxconn) so that 200 connections are all
accepted at once. Beside it, in the same process, N pure-Python spinning
threads count rounds of `for _ in range(1000): pass`.

--pool N: the server is a fixed pool of N worker threads instead, in the
design of gunicorn's gthread worker (stdlib only): a dispatcher thread waits
in a selector on the listening socket and every idle keep-alive connection;
a readable connection is submitted to a ThreadPoolExecutor(max_workers=N),
whose worker reads one request, answers it and puts the connection back in
the selector. So more connections than workers are served in turn, one
request per turn, and an idle connection holds no worker. Each request gets
a little interpreter work (its header lines parsed into a dict, a JSON
document of 20 records encoded: about 80 us of CPU on stock CPython 3.13 on
the machine of docs/servers.md) and a JSON response of about 1.5 KB, Nagle
off. The connections default to 16 (more than the 8 workers that
cpython/bench/server.sh --pool 8 asks for); the warm-up waits until the
dispatcher has accepted every connection.

The load generator is wrk (`apt-get install wrk`): `wrk -t1 -cC --latency
--timeout 10s -s script.lua` with keep-alive connections, one request in
flight per connection. p50, p90 and p99 are parsed from wrk's --latency
distribution; p99.9 and the maximum come from the Lua script's done()
callback (latency:percentile(99.9)). Note that wrk 4 "corrects" its latency
histogram for coordinated omission before reporting it (stats_correct: a
sample longer than twice the mean per-connection request interval adds
synthetic samples below it), so its percentiles are those an open-loop
client would see, heavier-tailed than the raw samples. A request slower than
--timeout (10 s) is counted as a timeout, not in the percentiles; the table
marks cells with timeouts or socket errors. req/s is the server's own count
of requests answered over the load window.

Warm-up: wrk opens every connection at once, and a thread-per-connection
server accepts them one by one, starting a thread for each; with many
connections and a busy lock that takes long (the acceptor is one more thread
waiting for the GIL), and the first request of each late connection would
carry that wait. By default the script's delay() holds every request back
until the server runs a thread for every connection (the time it took is
reported as "accepting the connections"); the load window (--seconds) starts
then, and wrk is stopped with SIGINT at its end. wrk's mean request interval
for its correction is taken over its whole run, warm-up included: a warm-up
of several seconds weakens the correction somewhat (see accept_time in the
JSON). --no-warmup measures from wrk's start instead, acceptance included.

wrk threads: the machine this was written for has 2 CPUs, and the server
process alone can keep one busy (the GIL holder) plus part of the other
(handler threads in system calls, with the GIL released). wrk -t2 would put
two busy wrk threads beside it; -t1 (the default, --wrk-threads) keeps wrk to
at most one CPU. wrk's CPU use over the load window is reported per run
(0.1-0.3 CPU at these rates), with the server's and everything else's on the
machine (other jobs: noise).

Spinner share: before the load, the spinners run alone for --idle seconds
(in the same process, the server idle) and their rounds per second are
measured; "spinner share" is their rate under load divided by that: 1.0 means
the load cost them nothing, 0.0 that they starved. With 2 spinners both
figures are totals (the GIL lets one run at a time either way).

Rounds: for each cell (connections x spinners) every interpreter runs once
per round, in an order rotated each round; the table gives, per metric, the
median over --repeat rounds, and each value's ratio to the first interpreter
given (conventionally stock).

--diag (interpreters built --with-rust-gil only; others report nothing): the
server turns on the lock's histograms; each run records the lock's counters
and wait/hold histograms over the load window (as differences), reported per
request, and (every interpreter) the handler and spinner threads' scheduler
statistics (/proc/<pid>/task/<tid>/schedstat: time runnable but waiting for
a CPU). --trace-dir DIR also records a GIL trace (Chrome JSON, one file per
run, DIR/NAME-cC-sS-rR.json) of --trace-seconds seconds, starting one second
into the load.

Controls for telling the lock's share of a tail from the OS scheduler's
(docs/servers.md, "Where the rest of the tail is"): --spinner-sched idle
(or batch) runs the in-process spinners under that Linux scheduling policy
(SCHED_IDLE: a woken handler preempts a spinner at once); --external-spinners
N runs N spinning processes (this script's Python, `while True: pass`) beside
the server for the whole measurement: the same CPU contention with no lock
shared.

The processes control, in every cell with spinners: "processes" is the
server of --control NAME (default: the first --python) with no spinning
thread, run while as many spinning processes of the same interpreter run
beside it (under --spinner-sched's policy too). They take the CPUs as the
spinning threads do but share no lock:
what the server loses there is the machine's, the limit for this machine.
Every table gives each interpreter's ratio to it beside the ratio to the
first interpreter (--no-control leaves it out).
"""

import argparse
import contextlib
import json
import math
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

# ---------------------------------------------------------------------------
# The server: run by the interpreter under test, as `python -c CODE ARGS`,
# CODE being server_code(workers): SERVER_HEAD, then THREADED (workers 0)
# or POOL, then SERVER_TAIL.
# argv: spinners, diag (0/1), spin_sched, workers. Prints {"port": N} on
# stdout, then answers commands read from stdin, one JSON line each:
#   snap                      {"t", "spin", "cpu", "stats"?, "handler_errors"}
#   trace_start PATH          {"ok": true} or {"error": ...}
#   trace_stop                {"events": N} or {"error": ...}
SERVER_HEAD = r'''
import itertools, json, os, socket, sys, threading, time

spinners, diag, spin_sched, workers = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3], int(sys.argv[4])
try:
    import _rustgil
except ImportError:
    _rustgil = None
if diag and _rustgil is not None:
    _rustgil.enable_histograms(True)

counts = [0] * spinners

# --diag: which thread is which, for the scheduler statistics that the
# parent reads from /proc/<pid>/task/<tid>/schedstat (reading them here would
# take the GIL once per file); handler threads that end record their own
# in `finished`.
kinds = {}                     # native thread id -> "handler" / "spinner"
finished = {}                  # kind -> [run_ns, runqueue_ns, slices]

def schedstat():
    try:
        with open("/proc/thread-self/schedstat") as f:
            return [int(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None

def spin(i):
    kinds[threading.get_native_id()] = "spinner"
    if spin_sched != "other":
        try:  # this thread only: Linux applies the policy per thread
            os.sched_setscheduler(0, getattr(os, "SCHED_" + spin_sched.upper()), os.sched_param(0))
        except (AttributeError, OSError) as e:
            sys.stderr.write(f"spinner {i}: cannot run under SCHED_{spin_sched.upper()}: {e}\n")
            os._exit(3)
    c = 0
    while True:
        for _ in range(1000):
            pass
        c += 1
        counts[i] = c

for i in range(spinners):
    threading.Thread(target=spin, args=(i,), name=f"spinner-{i}", daemon=True).start()

served = itertools.count()     # next(served): atomic under the GIL, unlike += 1
errors = [0]
started = []                   # when each connection was taken up
'''

# A thread per connection: the standard library's ThreadingHTTPServer.
THREADED = r'''
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = b"Hello, world!!!\n"  # 16 bytes

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"    # keep-alive
    disable_nagle_algorithm = True   # TCP_NODELAY on accepted sockets

    def do_GET(self):
        next(served)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format, *args):
        pass

    def setup(self):
        # When each connection's handler thread got going: with many
        # connections opened at once, the last ones wait for the acceptor
        # thread to reach them (see "accept spread" in the report).
        started.append(time.monotonic())
        if diag:
            kinds[threading.get_native_id()] = "handler"
        super().setup()

    def finish(self):
        # A handler thread that ends records its scheduler statistics in
        # `finished` (--diag; see `kinds` above).
        try:
            super().finish()
        finally:
            tid = threading.get_native_id()
            st = schedstat()
            if kinds.pop(tid, None) and st is not None:
                acc = finished.setdefault("handler", [0, 0, 0])
                for j in range(3):
                    acc[j] += st[j]

class Server(ThreadingHTTPServer):
    request_queue_size = 1024        # listen backlog: 200 connections at once
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        errors[0] += 1               # e.g. a reset at the end of a wrk run

httpd = Server(("127.0.0.1", 0), Handler)
threading.Thread(target=httpd.serve_forever, name="acceptor", daemon=True).start()
port = httpd.server_address[1]
'''

POOL = r'''
# A fixed pool of WORKERS threads, in gunicorn's gthread design: one thread
# (here "dispatcher", gthread's main loop) waits in a selector on the
# listening socket and on every idle keep-alive connection; a connection
# that becomes readable leaves the selector and is submitted to a
# ThreadPoolExecutor(max_workers=WORKERS); the worker reads one request,
# answers it and registers the connection in the selector again
# (gthread's finish_request), so that more connections than workers are
# served in turn and an idle connection holds no worker.
import concurrent.futures, selectors

ITEMS = 20      # the per-request work: about 80 us of Python on stock

def respond(head):
    """The request's header lines parsed into a dict, and a JSON document
    built from them and ITEMS records: the interpreter's work per request."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = dict(line.split(": ", 1) for line in lines[1:])
    doc = {"method": method, "path": path,
           "headers": {k.lower(): len(v) for k, v in headers.items()},
           "items": [{"id": i, "name": f"item-{i}", "price": i * 0.25, "tags": ["a", "b", str(i % 7)]}
                     for i in range(ITEMS)]}
    body = json.dumps(doc).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

class Conn:
    __slots__ = ("sock", "buf")

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

selector = selectors.DefaultSelector()
selector_lock = threading.Lock()   # gthread's: register/unregister from two threads

def serve_one(conn):
    """A worker's turn: one request, then the connection back to the selector."""
    try:
        while b"\r\n\r\n" not in conn.buf:
            data = conn.sock.recv(65536)
            if not data:           # the client closed its connection
                conn.sock.close()
                return
            conn.buf += data
        head, _, conn.buf = conn.buf.partition(b"\r\n\r\n")
        conn.sock.sendall(respond(head))
        next(served)
    except ConnectionError:        # a reset at the end of a wrk run
        conn.sock.close()
        return
    except Exception as e:
        errors[0] += 1
        sys.stderr.write(f"server: {e!r}\n")
        conn.sock.close()
        return
    with selector_lock:
        selector.register(conn.sock, selectors.EVENT_READ, conn)

def worker_started():
    if diag:
        kinds[threading.get_native_id()] = "handler"

listener = socket.create_server(("127.0.0.1", 0), backlog=1024)   # 200 connections at once
executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="worker",
                                                 initializer=worker_started)
selector.register(listener, selectors.EVENT_READ, None)

def dispatch():
    while True:
        for key, _ in selector.select():
            if key.data is None:
                sock, _ = listener.accept()
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                started.append(time.monotonic())
                with selector_lock:
                    selector.register(sock, selectors.EVENT_READ, Conn(sock))
            else:
                with selector_lock:
                    selector.unregister(key.fileobj)
                executor.submit(serve_one, key.data)

threading.Thread(target=dispatch, name="dispatcher", daemon=True).start()
port = listener.getsockname()[1]
'''

SERVER_TAIL = r'''
def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

answer({"port": port})
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "snap":
        t = os.times()
        snap = {"t": time.monotonic(), "spin": sum(counts), "cpu": t.user + t.system,
                "handler_errors": errors[0], "handlers": len(started),
                "served": int(repr(served)[6:-1]),   # count(N) -> N, without counting
                "first_handler": started[0] if started else None,
                "last_handler": started[-1] if started else None}
        if diag and _rustgil is not None:
            snap["stats"] = _rustgil.stats()
            snap["monitor_wakeups"] = _rustgil.monitor_wakeups()
        if diag:
            snap["kinds"] = dict(kinds)
            snap["finished"] = {k: list(v) for k, v in finished.items()}
        answer(snap)
    elif cmd == "count":
        answer({"handlers": len(started), "last_handler": started[-1] if started else None})
    elif cmd == "trace_start":
        try:
            _rustgil.trace_start(arg)
            answer({"ok": True})
        except Exception as e:
            answer({"error": repr(e)})
    elif cmd == "trace_stop":
        try:
            answer({"events": _rustgil.trace_stop()})
        except Exception as e:
            answer({"error": repr(e)})
    else:
        answer({"error": f"unknown command {cmd!r}"})
'''



def server_code(workers):
    """The server's program: a thread per connection (workers 0) or a pool."""
    return SERVER_HEAD + (POOL if workers else THREADED) + SERVER_TAIL


# The wrk script. With a warm-up, delay(): wrk opens every connection at
# once, then asks delay() before each request, and a connection's latency
# clock starts when its request is written, after the delay. The first call
# blocks wrk (no request has been sent yet) until the flag file exists: this
# script creates it once the server has started a thread for every
# connection, so the measured load starts with every connection accepted.
# Then 0 ms. done(): the numbers wrk's --latency output lacks (µs).
#
# The wait sleeps with LuaJIT's ffi (usleep), not os.execute("sleep"): wrk
# installs its SIGINT handler after starting its threads, and system() in a
# thread restores the disposition it found (ignored) when it returns, so
# SIGINT would no longer stop wrk.
WRK_DELAY = r'''
local flag = "FLAG"
local ready = false
local ok, ffi = pcall(require, "ffi")
local nap
if ok then
  ffi.cdef("int usleep(unsigned int usec);")
  nap = function() ffi.C.usleep(20000) end
else
  nap = function() os.execute("sleep 0.02") end
end
function delay()
  if not ready then
    while true do
      local f = io.open(flag, "r")
      if f then f:close() break end
      nap()
    end
    ready = true
  end
  return 0
end
'''

WRK_DONE = r'''
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "SERVERBENCH requests=%d duration_us=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
    "p50=%d p90=%d p99=%d p999=%d max=%d mean=%.1f\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean))
end
'''


def wrk_script(flag):
    """The Lua script for one run, in a temporary file (the caller deletes
    it); flag: the warm-up's flag file, or None for no warm-up."""
    f = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    if flag:
        # Defined only with a warm-up: with delay() wrk takes one more turn
        # of its event loop per request.
        f.write(WRK_DELAY.replace("FLAG", flag))
    f.write(WRK_DONE)
    f.close()
    return f.name


WRK_TIMEOUT_S = 10
ACCEPT_LIMIT_S = 120  # the longest warm-up: accepting every connection


class Interpreter:
    """One --python NAME=PATH [ENV=VALUE ...] argument."""

    def __init__(self, spec):
        name, eq, rest = spec.partition("=")
        name = name.strip()
        if not eq or not name or not rest.strip():
            raise argparse.ArgumentTypeError(
                f"--python wants NAME=PATH [ENV=VALUE ...], e.g. 'priority=/x/python3.13 PYTHON_RUST_GIL=priority'; "
                f"got {spec!r}")
        try:
            words = shlex.split(rest)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"--python {spec!r}: {e}") from None
        self.name, self.path = name, words[0]
        self.extra_env = {}
        for w in words[1:]:
            key, eq, value = w.partition("=")
            if not eq or not key:
                raise argparse.ArgumentTypeError(f"--python {spec!r}: {w!r} is not ENV=VALUE")
            self.extra_env[key] = value
        if shutil.which(self.path) is None:
            raise argparse.ArgumentTypeError(f"--python {spec!r}: {self.path} is not an executable")
        self.path = shutil.which(self.path)
        self.env = {**os.environ, **self.extra_env}

    def describe(self):
        env = " ".join(f"{k}={v}" for k, v in self.extra_env.items())
        return f"{self.path} {env}".strip()


class ServerProcess:
    def __init__(self, interp, spinners, diag, spin_sched="other", workers=0):
        self.interp = interp
        self.errfile = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([interp.path, "-c", server_code(workers), str(spinners),
                                      "1" if diag else "0", spin_sched, str(workers)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errfile,
                                     env=interp.env, text=True, bufsize=1)
        self.pid = self.proc.pid
        hello = self._read()
        if "port" not in hello:
            self.close()
            raise RuntimeError(f"{interp.name}: the server did not start: {hello}")
        self.port = hello["port"]

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.errfile.seek(0)
            err = self.errfile.read()[-3000:]
            raise RuntimeError(f"{self.interp.name}: the server process exited "
                               f"(status {self.proc.poll()}); its stderr:\n{err}")
        return json.loads(line)

    def command(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        if "kinds" in answer:
            answer["sched"] = self.sched(answer)
        return answer

    def sched(self, snap):
        """The server's threads' scheduler statistics, summed by kind of
        thread: [time on a CPU, time runnable but waiting for one, slices]."""
        out = {k: list(v) for k, v in snap["finished"].items()}
        for tid, kind in snap["kinds"].items():
            try:
                with open(f"/proc/{self.proc.pid}/task/{tid}/schedstat") as f:
                    st = [int(x) for x in f.read().split()[:3]]
            except (OSError, ValueError):
                continue  # the thread has ended (and recorded its own)
            acc = out.setdefault(kind, [0, 0, 0])
            for j in range(3):
                acc[j] += st[j]
        return out

    def cpu_seconds(self):
        return self.command("snap")["cpu"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.errfile.close()


def parse_duration(text):
    """wrk's '1.23ms' / '456.00us' / '2.01s' / '1.00m' -> microseconds."""
    for unit, scale in (("us", 1.0), ("ms", 1e3), ("s", 1e6), ("m", 60e6), ("h", 3600e6)):
        if text.endswith(unit):
            try:
                return float(text[: -len(unit)]) * scale
            except ValueError:
                break
    raise ValueError(f"cannot read wrk's duration {text!r}")


def parse_wrk(out):
    """wrk's output -> dict of numbers (latencies in µs)."""
    res = {}
    in_dist = False
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("Latency Distribution"):
            in_dist = True
            continue
        if in_dist:
            parts = s.split()
            if len(parts) == 2 and parts[0].endswith("%"):
                res[f"p{parts[0][:-1]}"] = parse_duration(parts[1])
                continue
            in_dist = False
        if s.startswith("Requests/sec:"):
            res["rps"] = float(s.split()[1])
        elif s.startswith("SERVERBENCH"):
            for kv in s.split()[1:]:
                k, _, v = kv.partition("=")
                res[f"lua_{k}"] = float(v)
        elif s.startswith("Non-2xx or 3xx responses:"):
            res["non2xx"] = int(s.split(":")[1])
    missing = [k for k in ("rps", "p50", "p90", "p99", "lua_p999") if k not in res]
    if missing:
        raise RuntimeError(f"could not find {', '.join(missing)} in wrk's output:\n{out}")
    res["p999"] = res["lua_p999"]
    res["max"] = res["lua_max"]
    res["errors"] = int(sum(res[f"lua_{k}"] for k in ("connect", "read", "write", "status", "timeout")))
    res["timeouts"] = int(res["lua_timeout"])
    return res


def machine_busy():
    """CPU seconds the whole machine has been busy (all CPUs), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    """CPU seconds a process (all its threads) has used, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def diff_stats(a, b):
    """Counters and histograms over a run (b - a)."""
    out = {}
    for k, v in b.items():
        if isinstance(v, list):
            out[k] = [y - x for x, y in zip(a[k], v)]
        elif isinstance(v, bool):
            out[k] = v
        elif isinstance(v, (int, float)):
            out[k] = v - a.get(k, 0)
    return out


def one_run(interp, conns, spinners, args, trace_path=None):
    server = ServerProcess(interp, spinners, args.diag or trace_path is not None, args.spinner_sched, args.pool)
    lua_path = flag = wrk = None
    try:
        time.sleep(0.3)  # imports done, spinners going
        rec = {"python": interp.name, "connections": conns, "spinners": spinners}
        if spinners:
            a = server.command("snap")
            time.sleep(args.idle)
            b = server.command("snap")
            rec["spin_idle_rate"] = (b["spin"] - a["spin"]) / (b["t"] - a["t"])
        threads = max(1, min(args.wrk_threads, conns))
        if not args.no_warmup:
            flag = tempfile.mktemp(prefix="serverbench-go-")
        lua_path = wrk_script(flag)
        # wrk is stopped with SIGINT (it then reports as usual) after
        # --seconds of load; -d is only a backstop.
        cmd = [args.wrk, f"-t{threads}", f"-c{conns}", f"-d{int(args.seconds + ACCEPT_LIMIT_S + 30)}s",
               "--latency", "--timeout", f"{WRK_TIMEOUT_S}s", "-s", lua_path,
               f"http://127.0.0.1:{server.port}/"]
        start = server.command("snap")
        t_start = time.monotonic()
        wrk = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if flag:
            # Warm-up: wait until the server runs a thread per connection.
            while True:
                snap = server.command("count")
                if snap["handlers"] - start["handlers"] >= conns:
                    break
                if time.monotonic() - t_start > ACCEPT_LIMIT_S:
                    raise RuntimeError(f"{interp.name}: the server did not accept {conns} connections "
                                       f"in {ACCEPT_LIMIT_S} s ({snap['handlers'] - start['handlers']} so far)")
                time.sleep(0.02)
            rec["accept_time"] = snap["last_handler"] - start["t"]
            time.sleep(0.1)  # the last threads reach their first recv
            before = server.command("snap")
            with open(flag, "w"):
                pass
        else:
            before = start
        wrk0 = proc_cpu(wrk.pid)
        busy0 = machine_busy()
        t0 = time.monotonic()
        if trace_path:
            time.sleep(1.0)
            r = server.command(f"trace_start {trace_path}")
            if "error" in r:
                print(f"  trace: {interp.name}: {r['error']}", file=sys.stderr)
            else:
                time.sleep(args.trace_seconds)
                r = server.command("trace_stop")
                rec["trace"] = {"path": trace_path, **r}
        time.sleep(max(0.0, args.seconds - (time.monotonic() - t0)))
        t_stop = time.monotonic()
        wrk1 = proc_cpu(wrk.pid)
        busy1 = machine_busy()
        after = server.command("snap")
        wrk.send_signal(signal.SIGINT)
        try:
            out, _ = wrk.communicate(timeout=8)
        except subprocess.TimeoutExpired:
            # The signal reached a worker thread (which stopped) rather than
            # wrk's main thread (which sleeps for -d): once more.
            wrk.send_signal(signal.SIGINT)
            try:
                out, _ = wrk.communicate(timeout=WRK_TIMEOUT_S + 5)
            except subprocess.TimeoutExpired:
                wrk.kill()
                out, _ = wrk.communicate()
                raise RuntimeError(f"{interp.name}: wrk did not stop on SIGINT; its output:\n{out}") from None
        if wrk.returncode != 0:
            raise RuntimeError(f"wrk failed ({wrk.returncode}): {' '.join(cmd)}\n{out}")
        rec.update(parse_wrk(out))
        # wrk's Requests/sec counts the warm-up too (no requests in it), and
        # its workers stop up to 0.1 s after the SIGINT: req/s is the
        # server's own count over the load window (warm-up end to SIGINT).
        rec["wrk_rps"] = rec["rps"]
        rec["load_seconds"] = after["t"] - before["t"]
        rec["rps"] = (after["served"] - before["served"]) / rec["load_seconds"]
        wall = t_stop - t0
        rec["wrk_threads"] = threads
        rec["wrk_cpu"] = (wrk1 - wrk0) / wall if wrk0 is not None and wrk1 is not None else None
        rec["server_cpu"] = (after["cpu"] - before["cpu"]) / (after["t"] - before["t"])
        if busy0 is not None and busy1 is not None:
            # Everything else the machine ran meanwhile (other users' jobs, this script): noise.
            rec["other_cpu"] = max(0.0, (busy1 - busy0) / wall - (rec["wrk_cpu"] or 0) - rec["server_cpu"])
        rec["handler_errors"] = after["handler_errors"] - before["handler_errors"]
        rec["handlers"] = after["handlers"] - start["handlers"]
        if not flag and after["last_handler"] is not None:
            # No warm-up: from wrk's start to the last connection's thread starting.
            rec["accept_time"] = after["last_handler"] - start["t"]
        if spinners:
            rec["spin_load_rate"] = (after["spin"] - before["spin"]) / (after["t"] - before["t"])
            rec["spin_share"] = rec["spin_load_rate"] / rec["spin_idle_rate"] if rec["spin_idle_rate"] else None
        if "sched" in after:
            rec["sched"] = {k: [x - y for x, y in zip(v, before["sched"].get(k, [0, 0, 0]))]
                            for k, v in after["sched"].items()}
        if "stats" in after:
            rec["lock"] = diff_stats(before["stats"], after["stats"])
            rec["lock"]["monitor_wakeups"] = after["monitor_wakeups"] - before["monitor_wakeups"]
        return rec
    finally:
        if wrk is not None and wrk.poll() is None:
            wrk.kill()
            wrk.wait()
        server.close()
        for path in (lua_path, flag):
            if path and os.path.exists(path):
                os.unlink(path)


CONTROL = "processes"


SCHED_POLICIES = {"other": os.SCHED_OTHER, "batch": os.SCHED_BATCH, "idle": os.SCHED_IDLE}


@contextlib.contextmanager
def spinner_processes(python, n, sched="other", env=None):
    """N processes of PYTHON spinning for as long as the block runs, under
    the Linux scheduling policy SCHED (as --spinner-sched sets the threads')."""
    procs = [subprocess.Popen([python, "-c", "while True: pass"], env=env) for _ in range(n)]
    try:
        for proc in procs:
            os.sched_setscheduler(proc.pid, SCHED_POLICIES[sched], os.sched_param(0))
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def control_run(interp, conns, spinners, args):
    """The processes control of one cell: INTERP's server without spinning
    threads, beside SPINNERS spinning processes of INTERP."""
    with spinner_processes(interp.path, spinners, args.spinner_sched, interp.env):
        time.sleep(args.idle)  # as long as the spinning threads run alone before the load
        rec = one_run(interp, conns, 0, args)
    rec.update(python=CONTROL, spinners=spinners, control_processes=spinners)
    return rec


# ---------------------------------------------------------------------------
# The report.

def fmt_ms(us):
    if us is None:
        return "-"
    ms = us / 1000
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 100:
        return f"{ms:.1f} ms"
    return f"{ms:.0f} ms"


def median_of(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def p99_target(p50):
    """Issue 14's bound on p99: max(3 x p50, p50 + 2 ms)."""
    return max(3 * p50, p50 + 2000)


def bound_lines(results, names, conns_list, spinners_list):
    """Per interpreter: the cells whose median p99 is within issue 14's bound
    on their median p50 (issue 56's criterion), and the others."""
    rows = ["**p99 <= max(3 x p50, p50 + 2 ms)** (medians of the same cell):\n"]
    for n in names:
        cells, above = 0, []
        for c in conns_list:
            for s in spinners_list:
                runs = results.get((c, s, n), [])
                p50, p99 = median_of(runs, "p50"), median_of(runs, "p99")
                if p50 is None or p99 is None:
                    continue
                cells += 1
                if p99 > p99_target(p50):
                    above.append(f"c={c} s={s} (p99 {fmt_ms(p99)}, bound {fmt_ms(p99_target(p50))})")
        if cells:
            rows.append(f"- `{n}`: within it in {cells - len(above)} of {cells} cells"
                        + (f"; above: {', '.join(above)}" if above else ""))
    return "\n".join(rows)


def markdown(results, names, conns_list, spinners_list, args):
    base = names[0]
    control = CONTROL if CONTROL in names else None

    def cells(metric, fmt, note=None):
        rows = []
        head = "| conns | spinners | " + " | ".join(names) + " |"
        rows.append(head)
        rows.append("|---:|---:|" + "---:|" * len(names))
        for c in conns_list:
            for s in spinners_list:
                meds = {n: median_of(results.get((c, s, n), []), metric) for n in names}
                out = []
                for n in names:
                    v = meds[n]
                    if v is None:
                        out.append("-")
                        continue
                    text = fmt(v)
                    ratios = []
                    if n != base and meds[base]:
                        ratios.append(f"{v / meds[base]:.2f}x")
                    if control and n != control and meds.get(control):
                        ratios.append(f"{v / meds[control]:.2f}x {control}")
                    if ratios:
                        text += f" ({', '.join(ratios)})"
                    if note:
                        text += note(c, s, n)
                    out.append(text)
                rows.append(f"| {c} | {s} | " + " | ".join(out) + " |")
        return "\n".join(rows)

    def p99_note(c, s, n):
        runs = results.get((c, s, n), [])
        p50, p99 = median_of(runs, "p50"), median_of(runs, "p99")
        mark = ""
        if p50 is not None and p99 is not None and p99 > p99_target(p50):
            mark += " †"
        return mark

    def err_note(c, s, n):
        runs = results.get((c, s, n), [])
        errs = sum(r.get("errors", 0) for r in runs)
        to = sum(r.get("timeouts", 0) for r in runs)
        return f" ⚠{errs} err ({to} timeouts)" if errs else ""

    out = []
    if control and any(spinners_list):
        out.append(limit_table(results, names, conns_list, spinners_list, control) + "\n")
    out.append("**Requests per second** (median; ratio to " + base
               + (f", and to the {control} control (the same spinning work in other processes: "
                  "the machine's limit)" if control else "") + "):\n")
    out.append(cells("rps", lambda v: f"{v:.0f}", err_note))
    out.append("\n**p50 latency** (wrk, per request):\n")
    out.append(cells("p50", fmt_ms))
    out.append("\n**p90 latency:**\n")
    out.append(cells("p90", fmt_ms))
    out.append(f"\n**p99 latency** (ratio to {base}; † above issue 14's bound max(3 x p50, p50 + 2 ms) "
               "of the same cell):\n")
    out.append(cells("p99", fmt_ms, p99_note))
    out.append("\n" + bound_lines(results, names, conns_list, spinners_list))
    out.append("\n**p99.9 latency:**\n")
    out.append(cells("p999", fmt_ms))
    if any(s for s in spinners_list):
        out.append("\n**Spinner share**: the spinners' rounds/s under load / their rounds/s alone "
                   "just before (1.00 = unharmed, 0 = starved):\n")
        rows = ["| conns | spinners | " + " | ".join(names) + " |", "|---:|---:|" + "---:|" * len(names)]
        for c in conns_list:
            for s in spinners_list:
                if not s:
                    continue
                vals = [median_of(results.get((c, s, n), []), "spin_share") for n in names]
                rows.append(f"| {c} | {s} | " + " | ".join("-" if v is None else f"{v:.2f}" for v in vals) + " |")
        out.append("\n".join(rows))
    out.append("\n**CPU use during the load** (median, in CPUs; the machine has "
               f"{os.cpu_count()}): wrk / the server process / everything else on the machine:\n")
    rows = ["| conns | spinners | " + " | ".join(f"{n}" for n in names) + " |",
            "|---:|---:|" + "---:|" * len(names)]
    for c in conns_list:
        for s in spinners_list:
            vals = []
            for n in names:
                runs = results.get((c, s, n), [])
                w, sv, o = (median_of(runs, k) for k in ("wrk_cpu", "server_cpu", "other_cpu"))
                vals.append("-" if w is None else f"{w:.2f} / {sv:.2f} / {'-' if o is None else f'{o:.2f}'}")
            rows.append(f"| {c} | {s} | " + " | ".join(vals) + " |")
    out.append("\n".join(rows))
    out.append("\n**Accepting the connections**: seconds from wrk's start until the server "
               + ("accepted" if args.pool else "ran a thread for") + " every connection (median; " + ("not measured: the load started at once" if args.no_warmup else
               "the warm-up, not part of the load above") + "):\n")
    rows = ["| conns | spinners | " + " | ".join(names) + " |", "|---:|---:|" + "---:|" * len(names)]
    for c in conns_list:
        for s in spinners_list:
            vals = [median_of(results.get((c, s, n), []), "accept_time") for n in names]
            rows.append(f"| {c} | {s} | " + " | ".join("-" if v is None else f"{v:.2f}" for v in vals) + " |")
    out.append("\n".join(rows))
    if args.diag:
        out.append("\n" + diag_markdown(results, names, conns_list, spinners_list))
    return "\n".join(out) + "\n"


def limit_table(results, names, conns_list, spinners_list, control):
    """Every cell with spinners against the processes control (the same
    spinning work in other processes: the machine's limit): each
    interpreter's median over the control's, for requests/s (1.00x or more
    is as good as the limit), p50 and p99 (1.00x or less)."""
    shown = [n for n in names if n != control]
    rows = ["**Against the limit**: each cell with spinners as a ratio to the " + control
            + " control (the same server with the same spinning work in other processes: no lock "
            "shared, only the CPUs). Requests/s: 1.00x or more is as good as the limit; "
            "latencies: 1.00x or less.\n",
            "| conns | spinners | metric | " + control + " (the limit) | " + " | ".join(shown) + " |",
            "|---:|---:|---|---:|" + "---:|" * len(shown)]
    for c in conns_list:
        for s in spinners_list:
            if not s:
                continue
            for metric, label, fmt in (("rps", "requests/s", lambda v: f"{v:.0f}"),
                                       ("p50", "p50", fmt_ms), ("p99", "p99", fmt_ms)):
                limit = median_of(results.get((c, s, control), []), metric)
                if not limit:
                    continue
                vals = [median_of(results.get((c, s, n), []), metric) for n in shown]
                rows.append(f"| {c} | {s} | {label} | {fmt(limit)} | "
                            + " | ".join("-" if v is None else f"{v / limit:.2f}x" for v in vals) + " |")
    return "\n".join(rows)


def bucket_ranges():
    return [(2 ** i, 2 ** (i + 1)) for i in range(64)]


def served(r):
    """Requests the server answered over the window its lock counters cover."""
    return max(1.0, r["rps"] * r["load_seconds"])


def diag_markdown(results, names, conns_list, spinners_list):
    """Per request: the lock's counters; the wait histogram, coarsely."""
    rows = ["**Lock counters per request, and waits** (medians over rounds; rust-gil only). "
            "waits ≥1 ms / ≥16 ms / in [33, 67) ms: counts per 1000 requests; "
            "wait share ≥16 ms: those waits' part of all wait time. Handler run-queue wait: time the "
            "handler threads were runnable but not on a CPU (/proc schedstat), per request.\n",
            "| conns | spinners | python | switches | drop req. | preempt. | forced sw. | starv. prom. | "
            "lazy rel. | lazy takeovers | waits ≥1 ms | waits ≥16 ms | waits 33-67 ms | wait share ≥16 ms | "
            "mean hold | handler run-queue wait per request |",
            "|---:|---:|---|" + "---:|" * 13]
    for c in conns_list:
        for s in spinners_list:
            for n in names:
                runs = [r for r in results.get((c, s, n), []) if "lock" in r]
                if not runs:
                    continue

                def per_req(key, runs=runs):
                    return statistics.median(r["lock"][key] / served(r) for r in runs)

                def waits(lo_ns, hi_ns=None, runs=runs):
                    vals = []
                    for r in runs:
                        h = r["lock"]["wait_histogram"]
                        cnt = sum(h[i] for i in range(64) if 2 ** i >= lo_ns and (hi_ns is None or 2 ** i < hi_ns))
                        vals.append(cnt * 1000 / served(r))
                    return statistics.median(vals)

                def long_share(runs=runs):
                    vals = []
                    for r in runs:
                        h = r["lock"]["wait_histogram"]
                        # bucket midpoints (1.5 x lower bound) as an estimate
                        tot = sum(h[i] * 1.5 * 2 ** i for i in range(64))
                        lng = sum(h[i] * 1.5 * 2 ** i for i in range(64) if 2 ** i >= 16_000_000)
                        vals.append(lng / tot if tot else 0.0)
                    return statistics.median(vals)

                def mean_hold(runs=runs):
                    vals = []
                    for r in runs:
                        h = r["lock"]["hold_histogram"]
                        n_ = sum(h)
                        vals.append(sum(h[i] * 1.5 * 2 ** i for i in range(64)) / n_ if n_ else 0)
                    return statistics.median(vals)

                def runq(runs=runs):
                    vals = [r["sched"]["handler"][1] / served(r) / 1e3
                            for r in runs if "handler" in r.get("sched", {})]
                    return f"{statistics.median(vals):.0f} µs" if vals else "-"

                rows.append(
                    f"| {c} | {s} | {n} | {per_req('switches'):.2f} | {per_req('drop_requests'):.3f} | "
                    f"{per_req('preemptions'):.3f} | {per_req('forced_switches'):.3f} | "
                    f"{per_req('starvation_promotions'):.4f} | {per_req('lazy_releases'):.2f} | "
                    f"{per_req('lazy_takeovers'):.2f} | {waits(2 ** 20):.1f} | {waits(2 ** 24):.1f} | "
                    f"{waits(2 ** 25, 2 ** 26):.1f} | {long_share():.2f} | {mean_hold() / 1e3:.0f} µs | {runq()} |")
    return "\n".join(rows)


def make_parser(measuring=True):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", action="append", type=Interpreter if measuring else str,
                   metavar="'NAME=PATH [ENV=V ...]'",
                   help="an interpreter to measure (repeat; the first is the ratios' base)")
    p.add_argument("--pool", type=int, default=0, metavar="N",
                   help="serve with a pool of N worker threads (gunicorn gthread's design, see above) "
                        "instead of a thread per connection (default 0: a thread per connection)")
    p.add_argument("--connections", help="wrk connections per cell (default 1,10,50,200; with --pool, 16)")
    p.add_argument("--spinners", default="0,1,2", help="spinning threads in the server (default 0,1,2)")
    p.add_argument("--seconds", type=float, default=5.0, help="wrk's duration per run (default 5)")
    p.add_argument("--repeat", type=int, default=3, help="rounds per cell; medians are reported (default 3)")
    p.add_argument("--idle", type=float, default=1.0,
                   help="seconds the spinners run alone before the load, for their unloaded rate (default 1)")
    p.add_argument("--no-warmup", action="store_true",
                   help="start the load at once: the acceptance of the connections is then part of the "
                        "measurement (by default wrk's requests wait until the server runs a thread per connection)")
    p.add_argument("--wrk", default="wrk", help="the wrk binary (default: wrk on PATH)")
    p.add_argument("--wrk-threads", type=int, default=1,
                   help="wrk -t (default 1; at most the connection count), see above")
    p.add_argument("--diag", action="store_true", help="record the lock's counters and histograms (rust-gil)")
    p.add_argument("--trace-dir", help="also write a GIL trace per run (rust-gil) into this directory")
    p.add_argument("--trace-seconds", type=float, default=1.0, help="length of each trace (default 1)")
    p.add_argument("--spinner-sched", choices=("other", "batch", "idle"), default="other",
                   help="Linux scheduling policy of the in-process spinners (default other, i.e. SCHED_OTHER); "
                        "a control, see above")
    p.add_argument("--external-spinners", type=int, default=0, metavar="N",
                   help="also run N spinning processes beside the server for the whole measurement "
                        "(default 0); a control, see above")
    p.add_argument("--control", metavar="NAME",
                   help="the interpreter whose server runs beside spinning processes, the processes "
                        "control (default: the first --python); see above")
    p.add_argument("--no-control", action="store_true", help="leave the processes control out")
    p.add_argument("--out", help="also write the Markdown report to this file")
    p.add_argument("--json", help="write every run's raw numbers to this file (rewritten after each cell)")
    p.add_argument("--from-json", metavar="FILE",
                   help="measure nothing: write the report of an earlier run from its --json file")
    return p


def report_from_json(path, out):
    with open(path) as f:
        saved = json.load(f)
    args = make_parser(measuring=False).parse_args(saved["argv"][1:])
    runs = saved["runs"]
    names = list(saved["interpreters"])
    conns_list = sorted({r["connections"] for r in runs})
    spinners_list = sorted({r["spinners"] for r in runs})
    results = {}
    for r in runs:
        results.setdefault((r["connections"], r["spinners"], r["python"]), []).append(r)
    report = report_text(results, names, conns_list, spinners_list, args, saved["argv"], saved["started"],
                         saved["interpreters"], saved.get("somaxconn"))
    print(report)
    if out:
        with open(out, "w") as f:
            f.write(report)


def report_text(results, names, conns_list, spinners_list, args, argv, started, described, somaxconn):
    rounds = max((len(v) for v in results.values()), default=0)
    server = (f"a pool of {args.pool} worker threads (gunicorn gthread's design), ~80 us of Python "
              "and a 1.5 KB JSON response per request" if args.pool else
              "ThreadingHTTPServer (a thread per connection), a 16-byte response")
    header = (f"Command: `{' '.join(shlex.quote(a) for a in argv)}`\n\n"
              f"Server: {server}. "
              f"Started {started}; {os.cpu_count()} CPUs; wrk -t{args.wrk_threads} (at most one per connection), "
              f"{args.seconds:g} s of load per run"
              + ("" if args.no_warmup else
                 ", after a warm-up that lasts until every connection " + ("is accepted" if args.pool else "has its thread"))
              + f"; {rounds} interleaved round(s) per cell, medians; listen backlog 1024"
              + (f" (somaxconn {somaxconn})" if somaxconn else "") + ". "
              + (f"Spinners under SCHED_{args.spinner_sched.upper()}. " if args.spinner_sched != "other" else "")
              + (f"{args.external_spinners} spinning process(es) beside the server throughout. "
                 if args.external_spinners else "")
              + "Latency percentiles are wrk's, which it corrects for coordinated omission (see server.py --help).\n\n"
              "Interpreters:\n\n" + "\n".join(f"- `{n}`: {d if d.startswith('`') else f'`{d}`'}"
                                                 for n, d in described.items()) + "\n")
    return header + "\n" + markdown(results, names, conns_list, spinners_list, args)


def main():
    p = make_parser()
    args = p.parse_args()
    if args.from_json:
        report_from_json(args.from_json, args.out)
        return
    if not args.python:
        p.error("--python is required (or --from-json)")

    def numbers(text, what):
        try:
            vals = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            vals = []
        if not vals or any(v < 0 for v in vals):
            p.error(f"--{what} wants numbers separated by commas, e.g. {'1,10,50,200' if what == 'connections' else '0,1,2'}")
        return vals

    if args.pool < 0:
        p.error(f"--pool wants a number of worker threads (0: a thread per connection), got {args.pool}")
    if args.connections is None:
        args.connections = "16" if args.pool else "1,10,50,200"
    conns_list = numbers(args.connections, "connections")
    spinners_list = numbers(args.spinners, "spinners")
    if 0 in conns_list:
        p.error("--connections: wrk needs at least one connection")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.seconds < 1:
        p.error("--seconds must be at least 1")
    if args.external_spinners < 0:
        p.error("--external-spinners must be 0 or more")
    names = [i.name for i in args.python]
    if len(set(names)) != len(names):
        p.error("--python: every interpreter needs its own NAME")
    if CONTROL in names:
        p.error(f"--python {CONTROL}=...: that name is the processes control's")
    if args.no_control and args.control:
        p.error("--control and --no-control exclude each other")
    if args.control is not None and args.control not in names:
        p.error(f"--control {args.control!r} names no --python (given: {', '.join(names)})")
    control = None
    if not args.no_control and any(spinners_list):
        control = args.python[names.index(args.control) if args.control else 0]
    try:
        described = {i.name: f"`{i.describe()}`: {giloptions.describe(i.path, i.env)}" for i in args.python}
    except RuntimeError as e:
        p.error(str(e))
    if control is not None:
        names.append(CONTROL)
        described[CONTROL] = (f"`{control.describe()}` with no spinning thread, beside as many spinning "
                              f"processes of {control.name} as the cell has spinners")
    wrk = shutil.which(args.wrk)
    if wrk is None:
        sys.exit(f"server.py: wrk not found ({args.wrk!r}); install it, e.g. `apt-get install wrk` (Debian/Ubuntu), "
                 "or pass --wrk PATH")
    args.wrk = wrk
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)
    somaxconn = None
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            somaxconn = int(f.read())
        if somaxconn < max(conns_list):
            print(f"server.py: warning: net.core.somaxconn is {somaxconn}, below {max(conns_list)} connections: "
                  "the listen backlog is capped there", file=sys.stderr)
    except OSError:
        pass

    results = {}
    raw = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())

    def save_json():
        if args.json:
            with open(args.json + ".part", "w") as f:
                json.dump({"started": started, "argv": sys.argv, "somaxconn": somaxconn,
                           "interpreters": described,
                           "cpus": os.cpu_count(), "runs": raw}, f, indent=1)
            os.replace(args.json + ".part", args.json)

    outside = contextlib.ExitStack()
    outside.enter_context(spinner_processes(sys.executable, args.external_spinners))
    try:
        for c in conns_list:
            for s in spinners_list:
                for r in range(args.repeat):
                    runs = list(args.python) + ([None] if control is not None and s else [])
                    k = r % len(runs)
                    for interp in runs[k:] + runs[:k]:
                        if interp is None:
                            rec = control_run(control, c, s, args)
                        else:
                            trace = None
                            if args.trace_dir:
                                trace = os.path.join(args.trace_dir, f"{interp.name}-c{c}-s{s}-r{r + 1}.json")
                            rec = one_run(interp, c, s, args, trace)
                        rec["round"] = r + 1
                        raw.append(rec)
                        results.setdefault((c, s, rec["python"]), []).append(rec)
                        share = f" spin {rec['spin_share']:.2f}" if rec.get("spin_share") is not None else ""
                        errs = f" errors {rec['errors']}" if rec["errors"] else ""
                        print(f"  c={c:<3} s={s} round {r + 1}: {rec['python']:22} {rec['rps']:8.0f} req/s  "
                              f"p50 {fmt_ms(rec['p50']):>9}  p99 {fmt_ms(rec['p99']):>9}  "
                              f"p99.9 {fmt_ms(rec['p999']):>9}{share}  CPU wrk {rec['wrk_cpu']:.2f} "
                              f"other {rec.get('other_cpu', float('nan')):.2f}  "
                              f"accepted in {rec.get('accept_time', float('nan')):.2f} s{errs}",
                              file=sys.stderr, flush=True)
                save_json()
    finally:
        outside.close()
        save_json()

    report = report_text(results, names, conns_list, spinners_list, args, sys.argv, started,
                         described, somaxconn)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)


if __name__ == "__main__":
    main()
