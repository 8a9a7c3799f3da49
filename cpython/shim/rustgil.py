"""Who waited for the GIL, who held it, and for how long.

Run a script (or a module) under the rust-gil GIL's observers and get, at
exit, a per-thread table on stderr and a timeline picture::

    python -m rustgil [-o FILE.svg|FILE.json] [--ring N] script.py [args...]
    python -m rustgil [options] -m module [args...]

The table has, for each thread: the time it waited for the GIL, held it,
and spent released around blocking calls ("in calls"), how many times it
took the GIL, how many of those followed another thread (switches in), and
how many times it was forced to drop it; then the options text the GIL
is (``_rustgil.options()``, e.g. ``priority,spin_us=50``), which
``PYTHON_RUST_GIL`` takes to run the same lock again. The timeline (default
``rustgil-PID.svg`` in the current directory) has one row per thread:
running, waiting, in a call. A ``.json`` file opens in ui.perfetto.dev.

Within a program, ``_rustgil.measure()`` measures the calling thread inside
a block (see the docs' WSGI middleware), and ``_rustgil.thread_stats()``
gives every thread's totals. To trace a program without changing how it is
started, set ``PYTHON_RUST_GIL=priority,trace=/tmp/gil-%p.svg``.

Needs an interpreter configured ``--with-rust-gil``.
"""

import argparse
import atexit
import os
import runpy
import sys

__all__ = ["format_table", "main", "read_table"]

_COLUMNS = (
    ("thread", None),
    ("wait ms", "wait_ns"),
    ("hold ms", "hold_ns"),
    ("in calls ms", "call_ns"),
    ("acquisitions", "acquisitions"),
    ("switches in", "switches_in"),
    ("forced", "forced_releases"),
)


def format_table(stats, elapsed_ns=None):
    """The per-thread table of ``_rustgil.thread_stats()``'s result, as text."""
    rows = []
    for ident, s in sorted(stats.items(), key=lambda kv: -kv[1]["wait_ns"]):
        name = s["name"] or "thread"
        row = [f"{name} ({ident})"]
        for _, key in _COLUMNS[1:]:
            value = s[key]
            row.append(f"{value / 1e6:.1f}" if key.endswith("_ns") else str(value))
        rows.append(row)
    if stats:
        total = ["total"]
        for _, key in _COLUMNS[1:]:
            value = sum(s[key] for s in stats.values())
            total.append(f"{value / 1e6:.1f}" if key.endswith("_ns") else str(value))
        rows.append(total)
    header = [title for title, _ in _COLUMNS]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]

    def line(cells):
        first = cells[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(cells[1:], widths[1:]))
        return "  ".join([first, *rest])

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    if elapsed_ns is not None:
        out.append(f"over {elapsed_ns / 1e6:.1f} ms; threads sorted by time waiting for the GIL")
        reading = read_table(stats, elapsed_ns)
        if reading:
            out.append(reading)
    return "\n".join(out)


def read_table(stats, elapsed_ns):
    """One line that says what the table means for the program: how much of
    its threads' time went to waiting for the GIL, how busy the GIL was,
    and so whether more threads can help. None without data."""
    wait = sum(s["wait_ns"] for s in stats.values())
    lived = sum(s["wait_ns"] + s["hold_ns"] + s["call_ns"] for s in stats.values())
    if not lived or not elapsed_ns:
        return None
    waited = wait / lived
    busy = min(1.0, sum(s["hold_ns"] for s in stats.values()) / elapsed_ns)
    shares = (f"threads spent {waited:.0%} of their time waiting for the GIL, "
              f"which was held {busy:.0%} of the time")
    if waited >= 0.25 and busy >= 0.9:
        return (f"reading: {shares}: the program is bound by the GIL; more threads "
                "will not make it faster (move CPU work to processes, or to C code "
                "that releases the GIL)")
    if waited >= 0.10:
        return (f"reading: {shares}: the GIL is a visible cost; fewer CPU-bound "
                "threads (or CPU work in processes) would shorten the waits")
    return (f"reading: {shares}: the GIL is not what limits this program; threads "
            "that block in calls can be added without waiting for it")


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m rustgil",
        description="Run a script under the GIL's per-thread accounting and a trace; "
        "print a per-thread table at exit and write a timeline.",
    )
    p.add_argument("-o", "--output", metavar="FILE",
                   help="timeline file: .svg (picture) or .json (Perfetto); "
                        "default rustgil-PID.svg")
    p.add_argument("--ring", type=int, metavar="N", default=0,
                   help="keep only the last N events in the timeline (default: the first million)")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m does")
    p.add_argument("target", nargs="?", help="the script to run")
    return p


def _split(argv):
    """Our options, then the target and its arguments: everything after the
    script or -m MODULE is the program's, as for python itself."""
    takes_value = {"-o", "--output", "--ring"}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return argv[:i + 2], argv[i + 2:]
        if a.startswith("-m") and len(a) > 2:  # -mmodule
            return argv[:i + 1], argv[i + 1:]
        if a in takes_value:
            i += 2
            continue
        if a == "--" or not a.startswith("-") or a == "-":
            if a == "--":
                i += 1
            return argv[:i + 1], argv[i + 1:]
        i += 1
    return argv, []


def main(argv=None):
    try:
        import _rustgil
    except ImportError:
        sys.exit("python -m rustgil: this interpreter was not built --with-rust-gil")
    parser = _parser()
    ours, rest = _split(sys.argv[1:] if argv is None else list(argv))
    opts = parser.parse_args(ours)
    opts.args = rest
    if opts.module is not None:
        run_name, target = opts.module, None
    elif opts.target is not None:
        run_name, target = None, opts.target
    else:
        parser.error("give a script, or -m MODULE")
    if opts.ring < 0:
        parser.error(f"--ring must be a number of events >= 1, not {opts.ring}")
    output = opts.output or f"rustgil-{os.getpid()}.svg"

    # What python itself refuses, refused the same way before anything is
    # traced or written.
    if target is not None:
        _check_script(target)
    else:
        _check_module(run_name)

    _rustgil.set_thread_stats(True)
    try:
        _rustgil.trace_start(output, max_events=opts.ring, ring=opts.ring > 0)
    except ValueError as e:  # the library's rule for a trace file's name
        parser.error(str(e))
    except (OSError, RuntimeError) as e:
        sys.exit(f"python -m rustgil: cannot start the trace: {e}")
    start = _rustgil_now()

    def report():
        # atexit runs after the threading module joined its threads.
        elapsed = _rustgil_now() - start
        try:
            events = _rustgil.trace_stop()
        except (OSError, RuntimeError) as e:
            print(f"rustgil: the timeline could not be written: {e}", file=sys.stderr)
            events = None
        print(format_table(_rustgil.thread_stats(), elapsed), file=sys.stderr)
        if events is not None:
            print(f"rustgil: timeline ({events} events) in {output}", file=sys.stderr)
        print(f"rustgil: GIL options {_rustgil.options()}", file=sys.stderr)

    atexit.register(report)
    if target is not None:
        sys.argv = [target, *opts.args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")
    else:
        sys.argv = [run_name, *opts.args]
        runpy.run_module(run_name, run_name="__main__", alter_sys=True)


def _check_script(path):
    """Exits as ``python missing.py`` does, status 2 and one line, if the
    script cannot be opened. A directory or zip file is runpy's to judge."""
    if os.path.isdir(path):
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        print(f"python -m rustgil: can't open file {os.path.abspath(path)!r}: "
              f"[Errno {e.errno}] {e.strerror}", file=sys.stderr)
        sys.exit(2)


def _check_module(name):
    """Exits as ``python -m missing`` does, status 1 and one line, if no
    top-level module or package of that name can be found. Only the top
    level is looked up: finding a submodule would import its package
    before the trace starts."""
    import importlib.util
    top = name.partition(".")[0]
    try:
        found = top in sys.modules or (bool(top) and importlib.util.find_spec(top) is not None)
    except (ImportError, ValueError):
        found = False
    if not found:
        print(f"python -m rustgil: no module named {top or name!r}", file=sys.stderr)
        sys.exit(1)


def _rustgil_now():
    import time
    return time.perf_counter_ns()


if __name__ == "__main__":
    main()
