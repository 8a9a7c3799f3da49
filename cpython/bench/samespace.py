"""What one CPU-bound thread costs an asyncio server apart from the lock.

    python3 cpython/bench/samespace.py --python NAME=PATH [--python ...] [--rounds 3] [--seconds 3]

An asyncio echo server (1 client, 100-byte requests back to back, as
gilbench.py's asyncio1) runs four ways, each round once each, beside:

  none      nothing;
  thread    a pure-Python spinning thread (takes the GIL, as gilbench.py's);
  hash      a thread hashing 64 MiB in a loop: busy outside the GIL (hashlib
            releases it), so it shares the process's address space but
            almost never the lock;
  process   a spinning process (gilbench.py's processes control).

It prints each interpreter's median req/s per way and the TLB shootdowns
per request (the "TLB" line of /proc/interrupts, all CPUs; Linux only). A
thread of the same process, busy on another CPU, makes each munmap and
shrinking mremap of the server interrupt that CPU to flush its TLB; asyncio
makes such calls for every request it reads (a 256 KiB receive buffer,
mapped, shrunk and unmapped). A separate process shares no address space,
so "process" pays none of it; "hash" pays it without the lock: the gap
between "hash" and "process" is the address space's, between "thread" and
"hash" the lock's.
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys

SERVER = r'''
import asyncio, hashlib, os, socket, subprocess, sys, threading, time
way, seconds, client_python = sys.argv[1], float(sys.argv[2]), sys.argv[3]
CLIENT = """
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
if way == "thread":
    def spin():
        while True:
            for _ in range(1000):
                pass
    threading.Thread(target=spin, daemon=True).start()
elif way == "hash":
    buf = bytes(64 << 20)
    def digest():
        while True:
            hashlib.sha256(buf).digest()
    threading.Thread(target=digest, daemon=True).start()
elif way == "process":
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
time.sleep(0.2)

async def handle(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := await reader.read(100):
        writer.write(data)
        await writer.drain()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = await asyncio.create_subprocess_exec(
        client_python, "-c", CLIENT, str(port), str(seconds), stdout=asyncio.subprocess.PIPE)
    out, _ = await client.communicate()
    return int(out)

n = asyncio.run(main())
if way == "process":
    hog.kill()
print(n)
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


def parse_python(text):
    name, _, rest = text.partition("=")
    words = shlex.split(rest)
    if not name or not words:
        raise argparse.ArgumentTypeError(f"--python {text!r}: expected NAME=PATH [ENV=VALUE ...]")
    env = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return name, words[0], env


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", action="append", type=parse_python, required=True, metavar="NAME=PATH [ENV=V ...]")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--client-python", default=sys.executable,
                   help="the interpreter of the client process (default: this one)")
    args = p.parse_args()
    if args.rounds < 1 or args.seconds <= 0:
        p.error("--rounds must be >= 1 and --seconds > 0")
    rates = {(name, way): [] for name, _, _ in args.python for way in WAYS}
    flushes = {(name, way): [] for name, _, _ in args.python for way in WAYS}
    for _ in range(args.rounds):
        for name, path, env in args.python:
            for way in WAYS:
                before = tlb_shootdowns()
                out = subprocess.run([path, "-c", SERVER, way, str(args.seconds), args.client_python],
                                     env={**os.environ, **env}, capture_output=True, text=True, check=True)
                after = tlb_shootdowns()
                n = int(out.stdout.split()[-1])
                rates[name, way].append(n / args.seconds)
                if before is not None and after is not None and n:
                    flushes[name, way].append((after - before) / n)
    print(f"asyncio echo, 1 client, {args.rounds} rounds of {args.seconds:g} s, medians")
    print("| interpreter | beside | req/s | / process | TLB shootdowns per request |")
    print("|---|---|---:|---:|---:|")
    for name, _, _ in args.python:
        limit = statistics.median(rates[name, "process"])
        for way in WAYS:
            r = statistics.median(rates[name, way])
            f = f"{statistics.median(flushes[name, way]):.2f}" if flushes[name, way] else "-"
            print(f"| {name} | {way} | {r:.0f} | {r / limit:.2f}x | {f} |")


if __name__ == "__main__":
    main()
