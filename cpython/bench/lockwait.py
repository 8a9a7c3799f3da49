"""Where an I/O thread's latency goes: waiting for the lock, or not.

Runs under an interpreter built --with-rust-gil (it needs ``_rustgil``):

    $RUSTGIL_PYTHON cpython/bench/lockwait.py udp --spinners 2 [--seconds 2]
    $RUSTGIL_PYTHON cpython/bench/lockwait.py asyncio --clients 10 --spinners 1
    $RUSTGIL_PYTHON cpython/bench/lockwait.py echo --spinners 1 [--processes 0] [--rounds 5]

The policy is the interpreter's (``PYTHON_RUST_GIL=priority,spin_us=0``, say).

``udp``: gilbench.py's UDP ping. The main thread receives a datagram
carrying its send time (CLOCK_MONOTONIC) every 5 ms from a client process,
beside N spinning threads. For each datagram it records the delivery
latency and, with ``_rustgil.measure()`` around the ``recvfrom``, the time
it then waited for the lock. Latency minus that wait is time the lock
cannot see: the datagram in the kernel, the woken thread runnable but not
running. Prints both: p50, p99, max.

``asyncio``: gilbench.py's asyncio echo server in this process (its event
loop on the main thread, N spinning threads), with C client threads in a
client process sending 100-byte requests back to back. Prints requests/s
and the lock's counters per request: acquisitions, switches (a thread
taking the lock after another), drop requests, and takes by a CPU thread
that spun for an I/O holder (``spin_us``); then, from the per-thread
accounting, each thread's time per request waiting for the lock, holding
it, and in blocking calls with it released. The event loop's wait is what
the lock costs a request; a longer hold than with no spinner is time the
lock does not see (see samespace.py).
"""

import argparse
import asyncio
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time

try:
    import _rustgil
except ImportError:
    sys.exit("lockwait.py: needs an interpreter configured --with-rust-gil (no _rustgil)")

UDP_CLIENT = r'''
import socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + seconds
while time.monotonic() < end:
    c.sendto(str(time.monotonic_ns()).encode(), ("127.0.0.1", port))
    time.sleep(0.005)
c.sendto(b"done", ("127.0.0.1", port))
'''

ASYNCIO_CLIENT = r'''
import socket, sys, threading, time
port, clients, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
counts = [0] * clients
def client(i):
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"p" * 100
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.sendall(msg)
        left = len(msg)
        while left:
            left -= len(c.recv(left))
        counts[i] += 1
    c.close()
ts = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
for t in ts: t.start()
for t in ts: t.join()
print(sum(counts))
'''

ECHO_CLIENT = r'''
import socket, sys
port, rounds = int(sys.argv[1]), int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
import gilbench
for _ in range(rounds):
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print(gilbench.echo_transfer(c)[0], flush=True)
    c.close()
'''

COUNTERS = ("acquisitions", "switches", "drop_requests", "forced_switches", "cpu_spin_takes")


def spin():
    while True:
        pass


def quantiles(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2], xs[min(len(xs) - 1, int(len(xs) * 0.99))], xs[-1]


def udp(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    client = subprocess.Popen([args.client_python, "-c", UDP_CLIENT, str(s.getsockname()[1]),
                               str(args.seconds)])
    # The client's "done" can be lost if a backlog fills the socket buffer
    # (under a convoy): give up waiting some time after the last datagram.
    s.settimeout(args.seconds + 10)
    latency, wait = [], []
    while True:
        try:
            with _rustgil.measure() as m:
                data, _ = s.recvfrom(64)
        except TimeoutError:
            break
        now = time.monotonic_ns()
        if data == b"done":
            break
        latency.append(now - int(data))
        wait.append(m.wait_ns)
    client.wait()
    rest = [lat - w for lat, w in zip(latency, wait)]
    print(f"udp, {args.spinners} spinning threads, GIL options {_rustgil.options()}, "
          f"{len(latency)} datagrams:")
    for name, xs in (("delivery latency", latency), ("  waiting for the lock", wait),
                     ("  the rest (kernel, run queue)", rest)):
        p50, p99, top = quantiles(xs)
        print(f"  {name:32} p50 {p50 / 1e3:8.1f} us  p99 {p99 / 1e3:8.1f} us  max {top / 1e3:8.1f} us")
    late = [i for i, lat in enumerate(latency) if lat >= quantiles(latency)[1]]
    lock_bound = sum(1 for i in late if wait[i] * 2 >= latency[i])
    print(f"  of the {len(late)} slowest (p99 and above), {lock_bound} spent at least half "
          "their latency waiting for the lock")


def asyncio_echo(args):
    async def handle(reader, writer):
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := await reader.read(100):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        before, threads_before = _rustgil.counters(), _rustgil.thread_stats()
        client = await asyncio.create_subprocess_exec(
            args.client_python, "-c", ASYNCIO_CLIENT, str(port), str(args.clients), str(args.seconds),
            stdout=asyncio.subprocess.PIPE)
        out, _ = await client.communicate()
        after, threads_after = _rustgil.counters(), _rustgil.thread_stats()
        server.close()
        return int(out), {k: after[k] - before[k] for k in COUNTERS}, threads_before, threads_after

    requests, delta, threads_before, threads_after = asyncio.run(main())
    per = max(requests, 1)
    print(f"asyncio, {args.clients} clients, {args.spinners} spinning threads, GIL options "
          f"{_rustgil.options()}: {requests / args.seconds:.0f} req/s")
    print("  per request: " + ", ".join(f"{k} {delta[k] / per:.2f}" for k in COUNTERS))
    # Each thread's time per request: waiting for the lock, holding it, and
    # in blocking calls with it released (the event loop's is the request's
    # path; a spinner's wait is the time it was kept off the lock).
    for ident, st in threads_after.items():
        was = threads_before.get(ident)
        if was is None:
            continue
        role = "event loop" if ident == threading.main_thread().ident else (st["name"] or str(ident))
        print(f"  {role}: per request, waiting for the lock "
              f"{(st['wait_ns'] - was['wait_ns']) / per / 1e3:.1f} us, holding it "
              f"{(st['hold_ns'] - was['hold_ns']) / per / 1e3:.1f} us, in calls "
              f"{(st['call_ns'] - was['call_ns']) / per / 1e3:.1f} us")


def schedstat():
    """This thread's (time on a CPU, time runnable but not running), ns."""
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
        run, queued, _ = f.read().split()
    return int(run), int(queued)


def echo(args):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    client = subprocess.Popen([args.client_python, "-c", ECHO_CLIENT, str(s.getsockname()[1]),
                               str(args.rounds), os.path.dirname(os.path.abspath(__file__))],
                              stdout=subprocess.PIPE, text=True)
    me = threading.get_ident()
    print(f"echo, 640 x 16 KB, {args.spinners} spinning threads, {args.processes} spinning processes, "
          f"GIL options {_rustgil.options()}; per round:")
    for _ in range(args.rounds):
        c, _ = s.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        before, stats_before = _rustgil.counters(), _rustgil.thread_stats()[me]
        sched_before, use_before = schedstat(), resource.getrusage(resource.RUSAGE_THREAD)
        while data := c.recv(8192):
            c.sendall(data)
        after, stats_after = _rustgil.counters(), _rustgil.thread_stats()[me]
        sched_after, use_after = schedstat(), resource.getrusage(resource.RUSAGE_THREAD)
        c.close()
        seconds = float(client.stdout.readline())
        cpu = (use_after.ru_utime + use_after.ru_stime - use_before.ru_utime - use_before.ru_stime) * 1e3
        print(f"  {seconds * 1e3:6.1f} ms; per message "
              + ", ".join(f"{k} {(after[k] - before[k]) / 640:.2f}" for k in ("switches", "drop_requests"))
              + f"; the server thread: waiting for the lock "
              f"{(stats_after['wait_ns'] - stats_before['wait_ns']) / 1e6:.2f} ms, on a CPU {cpu:.1f} ms, "
              f"runnable but not running {(sched_after[1] - sched_before[1]) / 1e6:.1f} ms")
    client.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=("udp", "asyncio", "echo"))
    p.add_argument("--spinners", type=int, default=2)
    p.add_argument("--clients", type=int, default=10, help="asyncio: client threads (default 10)")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=5, help="echo: transfers (default 5)")
    p.add_argument("--processes", type=int, default=0,
                   help="spinning processes beside the server (default 0; the processes control)")
    p.add_argument("--client-python", default="python3",
                   help="the interpreter of the client process (default python3 on PATH)")
    args = p.parse_args()
    if args.spinners < 0 or args.processes < 0 or args.clients < 1 or args.seconds <= 0 or args.rounds < 1:
        p.error("--spinners and --processes must be >= 0, --clients and --rounds >= 1 and --seconds > 0")
    if not _rustgil.thread_stats_enabled():
        _rustgil.set_thread_stats(True)
    for _ in range(args.spinners):
        threading.Thread(target=spin, daemon=True).start()
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.processes)]
    time.sleep(0.2)  # let the spinners get going, as gilbench.py does
    try:
        {"udp": udp, "asyncio": asyncio_echo, "echo": echo}[args.scenario](args)
    finally:
        for proc in procs:
            proc.kill()
    sys.stdout.flush()
    os._exit(0)  # the spinners never end


if __name__ == "__main__":
    main()
