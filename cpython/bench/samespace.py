"""What one CPU-bound thread costs an I/O server apart from the lock.

    python3 cpython/bench/samespace.py --python NAME=PATH [--python ...] \
        [--scenario asyncio|echo] [--rounds 3] [--seconds 3] [--pin S,B,C]

A server runs four ways, each round once each, beside:

  none      nothing;
  thread    a pure-Python spinning thread (takes the GIL, as gilbench.py's);
  hash      a thread hashing 64 MiB in a loop: busy outside the GIL (hashlib
            releases it), so it shares the process's address space but
            almost never the lock;
  process   a spinning process (gilbench.py's processes control).

Scenarios (as gilbench.py's):
  asyncio   an asyncio echo server, 1 client sending 100-byte requests back
            to back for --seconds. Metric: requests/s.
  echo      a blocking echo server (recv(8192) / sendall on the main
            thread), 10 MB sent as 640 messages of 16 KB. Metric: seconds.

It prints each interpreter's median per way, its ratio to "process", and
the TLB shootdowns per request or message (the "TLB" line of
/proc/interrupts, all CPUs; Linux only); on an interpreter built
--with-rust-gil also the server thread's lock switches and lock wait per
request or message (its per-thread accounting). A thread of the same
process, busy on another CPU, makes each munmap and shrinking mremap of
the server interrupt that CPU to flush its TLB; asyncio makes such calls
for every request it reads (a 256 KiB receive buffer, mapped, shrunk and
unmapped). A separate process shares no address space, so "process" pays
none of it; "hash" pays it without the lock: the gap between "hash" and
"process" is the address space's, between "thread" and "hash" the lock's.

It also prints how often the server's thread was preempted per request or
message (taken off a CPU while it could run: /proc/thread-self/status).
--pin S,B,C keeps the server's thread on CPU S, the busy thread or process
on B and the client on C (Linux): 0,0,1 makes the server share its CPU
with the busy work, as the OS sometimes does on its own.
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gilbench import Interpreter  # noqa: E402  the --python NAME=PATH [ENV=V ...] parser

SERVER = r'''
import asyncio, hashlib, os, socket, subprocess, sys, threading, time
scenario, way, seconds, client_python = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
pins = [int(c) for c in sys.argv[5].split(",")] if len(sys.argv) > 5 else None

def pin(who, i):
    # os.sched_setaffinity(0, ...) keeps only the calling thread on the CPU.
    if pins is not None:
        os.sched_setaffinity(who, {pins[i]})

def preempted():
    # Times this thread was taken off a CPU while it could still run.
    with open("/proc/thread-self/status") as f:
        for line in f:
            if line.startswith("nonvoluntary_ctxt_switches:"):
                return int(line.split()[1])
try:
    import _rustgil
    _rustgil.set_thread_stats(True)
except ImportError:
    _rustgil = None
ASYNCIO_CLIENT = """
import socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
n, msg, end = 0, b"x" * 100, time.monotonic() + seconds
while time.monotonic() < end:
    s.sendall(msg)
    got = 0
    while got < 100:
        got += len(s.recv(100))
    n += 1
print(n)
"""
ECHO_CLIENT = """
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg = b"x" * 16384
start = time.perf_counter()
for _ in range(640):
    s.sendall(msg)
    left = len(msg)
    while left:
        left -= len(s.recv(left))
print(time.perf_counter() - start)
"""
if way == "thread":
    def spin():
        pin(0, 1)
        while True:
            pass
    threading.Thread(target=spin, daemon=True).start()
elif way == "hash":
    buf = bytes(64 << 20)
    def digest():
        pin(0, 1)
        while True:
            hashlib.sha256(buf).digest()
    threading.Thread(target=digest, daemon=True).start()
elif way == "process":
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    pin(hog.pid, 1)
pin(0, 0)
time.sleep(0.2)

def lock_stats():
    if _rustgil is None:
        return None
    st = _rustgil.thread_stats()[threading.main_thread().ident]
    return st["switches_in"], st["wait_ns"]

async def handle(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := await reader.read(100):
        writer.write(data)
        await writer.drain()

async def asyncio_main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = await asyncio.create_subprocess_exec(
        client_python, "-c", ASYNCIO_CLIENT, str(port), str(seconds), stdout=asyncio.subprocess.PIPE)
    pin(client.pid, 2)
    out, _ = await client.communicate()
    return int(out)

before, preempted_before = lock_stats(), preempted()
if scenario == "asyncio":
    units = asyncio.run(asyncio_main())
    metric = units / seconds
else:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = subprocess.Popen([client_python, "-c", ECHO_CLIENT, str(listener.getsockname()[1])],
                              stdout=subprocess.PIPE, text=True)
    pin(client.pid, 2)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(8192):
        conn.sendall(data)
    units, metric = 640, float(client.communicate()[0])
after, preempted_after = lock_stats(), preempted()
if way == "process":
    hog.kill()
print(units, metric, preempted_after - preempted_before, *([] if before is None else
      [after[0] - before[0], after[1] - before[1]]))
sys.stdout.flush()
os._exit(0)  # the busy threads never end
'''

WAYS = ("none", "thread", "hash", "process")


def tlb_shootdowns():
    with open("/proc/interrupts") as f:
        for line in f:
            if line.split(":")[0].strip() == "TLB":
                return sum(int(x) for x in line.split()[1:] if x.isdigit())
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", action="append", type=Interpreter, required=True, metavar="NAME=PATH [ENV=V ...]")
    p.add_argument("--scenario", choices=("asyncio", "echo"), default="asyncio")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=3.0, help="asyncio: the length of one run")
    p.add_argument("--client-python", default=sys.executable,
                   help="the interpreter of the client process (default: this one)")
    p.add_argument("--pin", metavar="SERVER,BUSY,CLIENT",
                   help="keep the server's thread, the busy thread or process, and the client each on "
                        "the CPU given (Linux), e.g. 0,0,1: the server and the busy work share CPU 0")
    args = p.parse_args()
    if args.rounds < 1 or args.seconds <= 0:
        p.error("--rounds must be >= 1 and --seconds > 0")
    if args.pin is not None:
        cpus = os.sched_getaffinity(0)
        try:
            pins = [int(c) for c in args.pin.split(",")]
        except ValueError:
            pins = []
        if len(pins) != 3 or not set(pins) <= cpus:
            p.error(f"--pin {args.pin!r}: give three CPU numbers, each one of {sorted(cpus)}")
    keys = [(i.name, way) for i in args.python for way in WAYS]
    metric = {k: [] for k in keys}
    per_unit = {k: {"tlb": [], "preempted": [], "switches": [], "wait": []} for k in keys}
    for _ in range(args.rounds):
        for interp in args.python:
            name, path = interp.name, interp.path
            for way in WAYS:
                before = tlb_shootdowns()
                try:
                    out = subprocess.run([path, "-c", SERVER, args.scenario, way, str(args.seconds),
                                          args.client_python, *([args.pin] if args.pin else [])],
                                         env=interp.env, capture_output=True, text=True, check=True)
                except (OSError, subprocess.CalledProcessError) as e:
                    detail = getattr(e, "stderr", None) or str(e)
                    sys.exit(f"samespace.py: {name} ({path}), beside {way}: the server failed: "
                             f"{detail.strip().splitlines()[-1] if detail.strip() else e}")
                after = tlb_shootdowns()
                fields = out.stdout.split()
                units = int(fields[0])
                metric[name, way].append(float(fields[1]))
                if before is not None and after is not None:
                    per_unit[name, way]["tlb"].append((after - before) / units)
                per_unit[name, way]["preempted"].append(int(fields[2]) / units)
                if len(fields) == 5:
                    per_unit[name, way]["switches"].append(int(fields[3]) / units)
                    per_unit[name, way]["wait"].append(int(fields[4]) / units / 1e3)
    unit = "request" if args.scenario == "asyncio" else "message"
    shown = "req/s" if args.scenario == "asyncio" else "seconds (lower is better)"
    print(f"{args.scenario}, {args.rounds} rounds, medians" + (f", pinned {args.pin}" if args.pin else ""))
    print(f"| interpreter | beside | {shown} | / process | TLB shootdowns per {unit} | "
          f"server thread preempted per {unit} | lock switches per {unit} | lock wait per {unit} |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")

    def med(xs, fmt):
        return fmt.format(statistics.median(xs)) if xs else "-"

    for name in (i.name for i in args.python):
        limit = statistics.median(metric[name, "process"])
        for way in WAYS:
            m = statistics.median(metric[name, way])
            u = per_unit[name, way]
            value = f"{m:.0f}" if args.scenario == "asyncio" else f"{m:.4f}"
            print(f"| {name} | {way} | {value} | {m / limit:.2f}x | {med(u['tlb'], '{:.2f}')} | "
                  f"{med(u['preempted'], '{:.2f}')} | {med(u['switches'], '{:.2f}')} | "
                  f"{med(u['wait'], '{:.1f} us')} |")


if __name__ == "__main__":
    main()
