"""What each interpreter of a benchmark runs: its version and the options
text of its lock (``_rustgil.options()``, e.g. ``priority,spin_us=50``), or
that it keeps CPython's own GIL. Reports print it, so that a figure names
the lock it was measured on even after a default changes."""

import subprocess

_PROBE = r'''
import platform
try:
    import _rustgil
except ImportError:
    options = None
else:
    options = _rustgil.options()
print(platform.python_version())
print(options or "")
'''


def describe(path, env):
    """``'3.14.7, GIL options `priority,spin_us=50`'`` for a rust-gil
    interpreter, ``'3.14.7, its own GIL'`` for a stock one. Raises
    RuntimeError, with the interpreter's message, if it cannot start (a bad
    PYTHON_RUST_GIL, say)."""
    r = subprocess.run([path, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{path} did not start: {(r.stderr or r.stdout).strip()[-500:]}")
    lines = r.stdout.splitlines()
    version = lines[0] if lines else "?"
    options = lines[1] if len(lines) > 1 else ""
    return f"{version}, GIL options `{options}`" if options else f"{version}, its own GIL"
