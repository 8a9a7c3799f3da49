"""A non-main thread forks while three threads spin; the child must exit.

    python cpython/fork_from_thread.py [threads-]return|exit RUNS DEADLINE_S

Each run starts three spinning threads and a fourth that spins a little
(so the GIL is contended and waited on at the moment of the fork), then
calls os.fork(). In the child that thread
  - return: returns normally: it is the child's only thread, so when it
    ends the process must end (exit status 0);
  - exit: calls os._exit(0);
  - threads-return, threads-exit: first starts a thread of its own and
    spins beside it, so the child's GIL is contended too, joins it, then
    returns or calls os._exit(0) as above.
The parent waits for the child for at most DEADLINE_S seconds. A child that
is still there is reported with its threads (name, state, kernel wait
channel, from /proc), then killed, and the script exits 1. With
RUSTGIL_FORK_KEEP=1 the child is left alive (for a debugger) instead.

smoke_test.py runs this in a subprocess of its own session, so that even a
hang of this script fails the test rather than blocking it.
"""

import os
import signal
import sys
import threading
import time
import warnings

# os.fork() warns when other threads are running; that is the point here.
warnings.simplefilter("ignore", DeprecationWarning)


def spin_until(stop):
    while not stop.is_set():
        pass


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def threads_of(pid):
    """The threads of a live process, one 'tid name state wchan' each."""
    rows = []
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            state = stat[stat.rindex(")") + 2]
            try:
                with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                    wchan = f.read() or "-"
            except OSError:
                wchan = "?"
            rows.append(f"{tid} {name!r} {state} {wchan}")
    except OSError as e:
        rows.append(f"({e})")
    return "; ".join(rows)


def one_run(mode):
    """Forks from a thread while three spin; returns (child pid, read end of
    a pipe the child writes one byte to once it runs Python code)."""
    stop = threading.Event()
    spinners = [threading.Thread(target=spin_until, args=(stop,)) for _ in range(3)]
    for t in spinners:
        t.start()
    r, w = os.pipe()
    forked = {}

    def forker():
        spin(0.01)
        pid = os.fork()
        if pid == 0:
            if mode.startswith("threads-"):
                t = threading.Thread(target=spin, args=(0.02,))
                t.start()
                spin(0.02)
                t.join()
            os.write(w, b"c")
            if mode.endswith("exit"):
                os._exit(0)
            return  # the child's last thread ends: so must the child
        forked["pid"] = pid

    f = threading.Thread(target=forker)
    f.start()
    f.join()
    stop.set()
    for t in spinners:
        t.join()
    os.close(w)
    return forked["pid"], r


def main():
    mode, runs, deadline = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    if mode not in ("return", "exit", "threads-return", "threads-exit"):
        sys.exit(f"unknown mode {mode!r}: return, exit, threads-return or threads-exit")
    for run in range(runs):
        pid, r = one_run(mode)
        end = time.monotonic() + deadline
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > end:
                print(f"run {run + 1}/{runs} ({mode}): child {pid} still alive after {deadline} s; "
                      f"its threads: {threads_of(pid)}", flush=True)
                if os.environ.get("RUSTGIL_FORK_KEEP"):
                    print(f"kept child {pid} alive (RUSTGIL_FORK_KEEP)", flush=True)
                else:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                sys.exit(1)
            time.sleep(0.002)
        reached = os.read(r, 1)
        os.close(r)
        code = os.waitstatus_to_exitcode(status)
        if (code, reached) != (0, b"c"):
            print(f"run {run + 1}/{runs} ({mode}): child {pid} exited with {code}, "
                  f"{'after' if reached else 'before'} running Python code", flush=True)
            sys.exit(1)
    print(f"{runs} runs ({mode}): every child exited", flush=True)


if __name__ == "__main__":
    main()
