"""What each Ruby of a benchmark runs: its version and the options text of
its lock (e.g. ``priority,spin_us=200``), or that it keeps Ruby's own GVL.
Reports print it, so that a figure names the lock it was measured on even
after a default changes."""

import re
import subprocess

_STATS = re.compile(r"GIL options (.*), switch interval ")


def describe(ruby, env):
    """``'3.3.8, GIL options `priority,spin_us=200`'`` for a Ruby on the
    lock, ``'3.3.8, its own GVL'`` for a stock one. Asks the lock's
    accounting at exit (``stats=1``) for the options text, under the
    interpreter's RUBY_RUST_GIL, or its default (``priority``) if that is
    unset. Raises RuntimeError, with Ruby's message, if it cannot start."""
    value = env.get("RUBY_RUST_GIL") or "priority"
    r = subprocess.run([ruby, "-e", "print RUBY_VERSION"], env={**env, "RUBY_RUST_GIL": value + ",stats=1"},
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        said = (r.stderr or r.stdout).strip()[-500:].replace(value + ",stats=1", value)
        raise RuntimeError(f"{ruby} did not start: {said}")
    m = _STATS.search(r.stderr)
    return f"{r.stdout.strip()}, GIL options `{m.group(1)}`" if m else f"{r.stdout.strip()}, its own GVL"
