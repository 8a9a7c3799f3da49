"""The 10 MB echo round by round: each round's time, its slowest message,
the kernel's TCP retransmissions, and (with --perf-sched) the server's
wake-ups that waited for a CPU while a CPU sat idle.

    python3 cpython/bench/echorounds.py \\
        --python "priority=$RUSTGIL_PYTHON PYTHON_RUST_GIL=priority" \\
        [--python ...] [--spinners 1,2] [--repeat 15] [--perf-sched]

gilbench.py's echo scenario (640 messages of 16 KB over loopback TCP, the
server looping recv(8192) / sendall), with the same servers: each
interpreter's server beside N spinning threads, and the processes control,
the first interpreter's server with no spinning thread beside N spinning
processes. Rounds are interleaved (every interpreter, then the control).
Per cell it prints the median, min and max time, the median of the rounds'
slowest messages, how many rounds saw a TCP retransmission (loopback drops
one now and then; the retransmission timer then costs the round 200 ms or
more), and each interpreter's ratio to the control paired round by round.

--perf-sched records the scheduler system-wide (`perf sched record -a`,
root) and prints, for each interpreter's servers and the control's, how
often the server's I/O thread (its main thread) was preempted per message
and how often by the client (this process), and its wake-ups that waited
more than 1 ms for a CPU and how many of those waited while a CPU sat
idle: a woken thread queued behind a busy CPU until the next load
balance, which the processes control, whose spinners keep both CPUs busy,
does not see. (`scripts/sched-late.py` reads the same trace for the main
job's simulated threads.)
"""

import argparse
import collections
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gilbench  # noqa: E402

def retransmitted_segments():
    """The kernel's count of TCP segments retransmitted (/proc/net/snmp)."""
    with open("/proc/net/snmp") as f:
        lines = [line.split() for line in f if line.startswith("Tcp:")]
    head, values = lines[0], lines[1]
    return int(values[head.index("RetransSegs")])


Round = collections.namedtuple("Round", "seconds slowest retransmits")


def one_round(interp, threads, processes, pids, kind):
    with gilbench.spinner_processes(interp, processes):
        server = gilbench.Server(interp, threads)
        pids[server.proc.pid] = kind
        try:
            before = retransmitted_segments()
            c = server.connect()
            try:
                seconds, slowest = gilbench.echo_transfer(c)
            finally:
                c.close()
            after = retransmitted_segments()
        finally:
            server.close()
    return Round(seconds, slowest, after - before)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# `perf sched timehist --state` lines: time, [cpu], task, wait, sched delay,
# run time (ms), the task's state as it left the CPU (R: preempted).
TIMEHIST = re.compile(r"\s*([\d.]+)\s+\[(\d+)\]\s+(.+?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+(\S+))?\s*$")
TASK = re.compile(r"\[(\d+)(?:/(\d+))?\]$")


def sched_report(timehist, pids, client):
    """Per kind of server, for its I/O thread (the main thread): its times
    on a CPU, the wake-ups that waited more than 1 ms for one, those of
    them during which a CPU idled for at least half the wait, its
    preemptions, and how many of those handed the CPU to the client
    (process CLIENT)."""
    runs = collections.defaultdict(list)  # cpu -> (start, end, idle?)
    waits = []
    preempted = collections.defaultdict(lambda: [0, 0])
    last = {}  # cpu -> the kind of server whose I/O thread it just preempted
    for line in timehist.splitlines():
        m = TIMEHIST.match(line)
        if not m:
            continue
        end, cpu, task = float(m[1]), int(m[2]), m[3].strip()
        delay, ran = float(m[5]) / 1e3, float(m[6]) / 1e3
        runs[cpu].append((end - ran, end, task.startswith("<idle>")))
        t = TASK.search(task)
        if cpu in last:
            kind = last.pop(cpu)
            if t and int(t[2] or t[1]) == client:
                preempted[kind][1] += 1
        if t and t[2] is None and int(t[1]) in pids:  # a server's main thread: its I/O thread
            kind = pids[int(t[1])]
            waits.append((kind, end - ran - delay, end - ran))
            if m[7] == "R":
                preempted[kind][0] += 1
                last[cpu] = kind
    for cpu in runs:
        runs[cpu].sort()

    def idle(a, b):
        return max(sum(max(0.0, min(e, b) - max(s, a)) for s, e, is_idle in spans if is_idle)
                   for spans in runs.values())

    report = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    for kind, a, b in waits:
        r = report[kind]
        r[0] += 1
        if b - a > 1e-3:
            r[1] += 1
            if idle(a, b) * 2 >= b - a:
                r[2] += 1
    for kind, (n, by_client) in preempted.items():
        report[kind][3:5] = [n, by_client]
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", action="append", required=True, type=gilbench.Interpreter,
                    metavar="NAME=PATH [ENV=VALUE ...]")
    ap.add_argument("--spinners", default="1,2", help="comma-separated spinner counts (default 1,2)")
    ap.add_argument("--repeat", type=int, default=15, help="rounds per cell (default 15)")
    ap.add_argument("--perf-sched", action="store_true",
                    help="record the scheduler with perf (root) and report waits for a CPU")
    args = ap.parse_args()
    try:
        spinners = [int(x) for x in args.spinners.split(",")]
    except ValueError:
        ap.error(f"--spinners wants comma-separated integers, got {args.spinners!r}")
    if any(n < 1 for n in spinners):
        ap.error("--spinners: each count must be at least 1 (the control needs spinners)")
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    names = [i.name for i in args.python]
    if "processes" in names or len(set(names)) != len(names):
        ap.error("--python names must be distinct and not 'processes'")

    perf = data = None
    if args.perf_sched:
        if not shutil.which("perf"):
            sys.exit("echorounds.py: --perf-sched needs perf (Debian: apt-get install linux-perf)")
        data = tempfile.NamedTemporaryFile(suffix=".data", delete=False).name
        perf = subprocess.Popen(["perf", "sched", "record", "-a", "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        if perf.poll() is not None:
            sys.exit("echorounds.py: perf sched record failed to start (it needs root)")

    pids = {}
    control = args.python[0]
    try:
        for n in spinners:
            res = {name: [] for name in names + ["processes"]}
            for r in range(args.repeat):
                for interp in args.python:
                    res[interp.name].append(one_round(interp, n, 0, pids, interp.name))
                res["processes"].append(one_round(control, 0, n, pids, "processes"))
                print(f"spinners={n} round {r + 1}: " + ", ".join(
                    f"{k} {v[-1].seconds * 1e3:.1f} ms" for k, v in res.items()), file=sys.stderr, flush=True)
            print(f"\nspinners={n}, {args.repeat} rounds:")
            for name, rounds in res.items():
                secs = [x.seconds for x in rounds]
                print(f"  {name:12} median {median(secs) * 1e3:7.1f} ms (min {min(secs) * 1e3:.1f}, "
                      f"max {max(secs) * 1e3:.1f}), slowest message median "
                      f"{median([x.slowest for x in rounds]) * 1e3:.2f} ms, rounds with a TCP "
                      f"retransmission {sum(1 for x in rounds if x.retransmits)}/{len(rounds)}")
            for name in names:
                ratios = sorted(a.seconds / b.seconds for a, b in zip(res[name], res["processes"]))
                print(f"  {name} / processes: {median([x.seconds for x in res[name]]) / median([x.seconds for x in res['processes']]):.2f}x "
                      f"the medians; paired by round median {median(ratios):.2f}x, "
                      f"range {ratios[0]:.2f}-{ratios[-1]:.2f}x")
    finally:
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
    if perf:
        timehist = subprocess.run(["perf", "sched", "timehist", "--state", "-i", data], capture_output=True,
                                  text=True).stdout
        os.unlink(data)
        messages = 640 * args.repeat * len(spinners)
        print("\nthe servers' I/O threads (perf sched): times on a CPU, wake-ups that waited > 1 ms for it and "
              "of those the ones beside a CPU idle for half the wait or more; preemptions per message, and the "
              "share that handed the CPU to the client:")
        for kind, (n, late, idle, pre, by_client) in sched_report(timehist, pids, os.getpid()).items():
            print(f"  {kind:12} {n:6} times on a CPU, {late:4} waited > 1 ms, {idle:4} of them beside an idle CPU; "
                  f"{pre / messages:.2f} preemptions per message, {by_client / max(pre, 1):.0%} to the client")


if __name__ == "__main__":
    main()
