"""Smoke test of an interpreter built --with-rust-gil. Run it with that
interpreter, under a policy:

    PYTHON_RUST_GIL=P RUSTGIL_EXPECTED_POLICY=P $RUSTGIL_PYTHON cpython/smoke_test.py

(both unset: the default policy). With STOCK_PYTHON set to a stock CPython
of the same version it also compares sys.setswitchinterval with that
interpreter's. It runs on CPython 3.13 and 3.14 alike. An
interpreter configured --with-rust-gil-policy=VALUE needs
RUSTGIL_BUILD_DEFAULT=VALUE (cpython/build.sh's builds: unset, priority).

Checks that the GIL really is the library's, wired the way the shim says:
_rustgil reports it, its counters move when threads contend, drop requests
reach the holder, the switch interval goes through and is kept as stock
keeps it, -X rust_gil, PYTHON_RUST_GIL (or its old name PYTHONRUSTGIL) and
the build's default select the policy and its options, in that order
(anything malformed is a start-up error with exit status 1, the value
echoed escaped), sysconfig reports the build's default, stats and histograms move, traces are written as Chrome JSON and
SVG, per-thread accounting (thread_stats(), measure(), the documented WSGI
middleware) reports known holds, waits and calls, a trace started from
PYTHON_RUST_GIL=...,trace=PATH has every thread's named row, also in a fork
child's own file and as a ring, python -m rustgil prints its table, the monitor thread (under the monitor presets) works and sleeps when
idle, a sub-interpreter with its own GIL gets its own lock (with the policy
read at start-up), a fork child has a working lock and, forked from a
non-main thread while others spin, exits (cpython/fork_from_thread.py), and
the _Py_DebugOffsets view of _gil.locked and _gil.last_holder is what
debuggers need (read in process through ctypes, and on 3.14 by the
_remote_debugging module from another process, as its profilers do).
"""

import ast
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

import _rustgil

# What PYTHON_RUST_GIL asked for; unset, the build's default.
EXPECTED_POLICY = os.environ.get("RUSTGIL_EXPECTED_POLICY", "priority")
# The variables that name the policy: the current name and the earlier one.
POLICY_VARIABLES = ("PYTHON_RUST_GIL", "PYTHONRUSTGIL")


def run_child(args, timeout=60, **kwargs):
    """subprocess.run(args, capture_output=True, text=True, timeout=...),
    except that a child still running at the timeout fails the test with
    its threads' C stacks (from gdb, when there is one) and its stderr, so
    that a hang says where it hangs; then it is killed."""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **kwargs) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = "(no gdb here to show them)"
            if shutil.which("gdb"):
                stacks = subprocess.run(["gdb", "-p", str(p.pid), "-batch", "-ex", "thread apply all bt"],
                                        capture_output=True, text=True, timeout=120).stdout
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f"{args!r} still ran after {timeout} s; its stderr:\n{err}\n"
                                 f"its threads:\n{stacks}") from None
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


class RustGilSmoke(unittest.TestCase):
    def test_module_reports_the_library(self):
        self.assertRegex(_rustgil.version, r"^\d+\.\d+\.\d+$")
        self.assertEqual(_rustgil.policy(), EXPECTED_POLICY)
        counters = {"acquisitions", "switches", "drop_requests", "forced_switches", "wait_ns",
                    "preemptions", "lazy_releases", "lazy_takeovers", "starvation_promotions",
                    "cpu_spin_takes"}
        self.assertEqual(set(_rustgil.counters()), counters)
        self.assertEqual(set(_rustgil.stats()),
                         counters | {"histograms_enabled", "wait_histogram", "hold_histogram",
                                     "wait_histogram_fine", "hold_histogram_fine"})
        self.assertEqual(_rustgil.lazy_release() > 0, "lazy" in EXPECTED_POLICY)
        self.assertEqual(_rustgil.monitor(), EXPECTED_POLICY.endswith("monitor"))
        # The priority presets spin 50 us for a hand-off unless spin_us= is
        # given; the others do not spin.
        self.assertEqual(round(_rustgil.spin() * 1e6), 50 if EXPECTED_POLICY.startswith("priority") else 0)
        self.assertEqual(_rustgil.laps(), 0)

    def test_the_options_text_is_the_lock(self):
        # What reports print: the preset, with CPython's default for it
        # spelled out, and every value some host's default sets for it.
        options = _rustgil.options()
        expected = {"priority": "priority,spin_us=50", "priority-lazy": "priority-lazy,spin_us=50",
                    "priority-monitor": "priority-monitor,spin_us=50",
                    "priority-lazy-monitor": "priority-lazy-monitor,spin_us=50",
                    "classic": "classic,interval_us=5000", "lazy": "lazy", "monitor": "monitor"}
        self.assertEqual(options, expected[EXPECTED_POLICY])
        # The dict has every setting, as the single functions give them,
        # each number setting under its options key (a setting added later
        # shows there too, with no function of its own).
        s = _rustgil.settings()
        self.assertLessEqual({"options": options, "preset": _rustgil.policy(),
                              "policy": "priority" if "priority" in EXPECTED_POLICY else "classic",
                              "interval_us": round(_rustgil.switch_interval() * 1e6),
                              "lazy_us": round(_rustgil.lazy_release() * 1e6),
                              "spin_us": round(_rustgil.spin() * 1e6), "laps": _rustgil.laps(),
                              "monitor": _rustgil.monitor()}.items(), s.items())
        # Each number the text gives is the dict's value under its key.
        code = "import _rustgil; print(sorted(_rustgil.settings().items()))"
        r = self.run_python(code, PYTHON_RUST_GIL="priority-lazy,interval_us=700,lazy_us=30,laps=2")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = dict(ast.literal_eval(r.stdout.strip()))
        self.assertEqual((got["interval_us"], got["lazy_us"], got["spin_us"], got["laps"]), (700, 30, 50, 2))
        # The text builds the same lock again, and tuned texts too.
        code = "import _rustgil; print(_rustgil.options())"
        for value, printed in [(options, options),
                               ("priority,spin_us=0", "priority,spin_us=0"),
                               ("priority-lazy,lazy_us=30,laps=2", "priority-lazy,lazy_us=30,spin_us=50,laps=2"),
                               ("classic,interval_us=700", "classic,interval_us=700")]:
            r = self.run_python(code, PYTHON_RUST_GIL=value)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, printed), f"{value}: {r.stderr}")
        old = sys.getswitchinterval()
        try:
            sys.setswitchinterval(0.002)
            self.assertIn("interval_us=2000", _rustgil.options())
            self.assertEqual(_rustgil.settings()["interval_us"], 2000)
        finally:
            sys.setswitchinterval(old)

    def test_counters_move_when_threads_contend(self):
        before = _rustgil.counters()
        threads = [threading.Thread(target=spin, args=(0.3,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = _rustgil.counters()
        self.assertGreater(after["switches"], before["switches"] + 3)
        self.assertGreater(after["drop_requests"], before["drop_requests"])
        self.assertGreater(after["forced_switches"], before["forced_switches"])
        self.assertGreater(after["wait_ns"], before["wait_ns"])

    def test_histograms_count_waits_and_holds(self):
        _rustgil.enable_histograms()
        try:
            _rustgil.reset_histograms()
            threads = [threading.Thread(target=spin, args=(0.1,)) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            s = _rustgil.stats()
            self.assertTrue(s["histograms_enabled"])
            self.assertEqual(len(s["wait_histogram"]), 64)
            self.assertGreater(sum(s["wait_histogram"]), 2)
            # Waits behind a spinning thread last about a switch interval (5 ms):
            # most of them in the buckets from 2**20 ns (1 ms) up.
            waits = s["wait_histogram"]
            self.assertGreater(sum(waits[20:]), sum(waits[:20]) // 4)
            self.assertGreater(sum(s["hold_histogram"]), 2)
            # The fine buckets: eight per power of two, summing to it.
            fine = s["wait_histogram_fine"]
            self.assertEqual(len(fine), 496)
            self.assertEqual(sum(fine), sum(waits))
            self.assertEqual(sum(fine[8 + 8 * 17:8 + 8 * 18]), waits[20])
        finally:
            _rustgil.enable_histograms(False)
        self.assertFalse(_rustgil.stats()["histograms_enabled"])

    def traced_spinners(self, path, **kwargs):
        _rustgil.trace_start(path, **kwargs)
        threads = [threading.Thread(target=spin, args=(0.05,), name=f"spinner-{i}") for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.001)  # the main thread: a voluntary release
        return _rustgil.trace_stop()

    def test_trace_to_chrome_json(self):
        import json
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "gil.json")
            events = self.traced_spinners(path)
            with open(path) as f:
                doc = json.load(f)
        self.assertGreater(events, 4)
        self.assertEqual(doc["otherData"]["events"], events)
        self.assertIn(f"GIL options {_rustgil.options()}", doc["otherData"]["title"])
        trace = doc["traceEvents"]
        names = {e["args"]["name"] for e in trace if e["name"] == "thread_name"}
        # The spinners have exited (their rows keep the default name); the
        # main thread is alive at trace_stop() and named after threading's.
        self.assertIn(f"MainThread ({threading.main_thread().ident})", names)
        states = {e["name"] for e in trace if e["ph"] == "X"}
        self.assertLessEqual({"running", "waiting"}, states)
        self.assertIn("syscall", states)  # time.sleep released the GIL

    def test_trace_names_rows_even_with_long_non_ascii_thread_names(self):
        import json
        import tempfile
        stop = threading.Event()
        t = threading.Thread(target=stop.wait, name="é" * 100)  # cut inside a character
        t.start()
        try:
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "gil.json")
                _rustgil.trace_start(path)
                spin(0.02)
                _rustgil.trace_stop()
                with open(path, encoding="utf-8") as f:
                    json.load(f)
        finally:
            stop.set()
            t.join()

    def test_trace_to_svg(self):
        import tempfile
        import xml.etree.ElementTree as ET
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "gil.svg")
            self.traced_spinners(path, title="two spinners", max_events=100_000)
            root = ET.parse(path).getroot()
        self.assertTrue(root.tag.endswith("svg"))
        texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
        self.assertIn("two spinners", texts)
        self.assertTrue(any(t.startswith("MainThread") for t in texts), texts)

    def test_trace_misuse_raises(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(ValueError):
                _rustgil.trace_start(os.path.join(d, "gil.txt"))
            with self.assertRaises(FileNotFoundError):
                _rustgil.trace_start(os.path.join(d, "no", "such", "gil.svg"))
            with self.assertRaises(ValueError):
                _rustgil.trace_start(os.path.join(d, "gil.svg"), max_events=-1)
            with self.assertRaises(RuntimeError):
                _rustgil.trace_stop()  # none running
            other = os.path.join(d, "other.svg")
            with open(other, "w") as f:
                f.write("keep me")
            _rustgil.trace_start(os.path.join(d, "gil.svg"))
            try:
                with self.assertRaises(RuntimeError):
                    _rustgil.trace_start(other)
            finally:
                _rustgil.trace_stop()
            with open(other) as f:
                self.assertEqual(f.read(), "keep me", "a refused trace_start emptied the file")

    def test_trace_start_never_writes_through_a_link_or_opens_a_fifo(self):
        import stat
        import tempfile
        with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as elsewhere:
            target = os.path.join(elsewhere, "precious")
            with open(target, "w") as f:
                f.write("precious")
            link = os.path.join(d, "gil.json")
            os.symlink(target, link)
            with self.assertRaisesRegex(OSError, "a symbolic link"):
                _rustgil.trace_start(link)
            dangling = os.path.join(d, "dangling.svg")
            os.symlink(os.path.join(elsewhere, "new-file"), dangling)
            with self.assertRaisesRegex(OSError, "a symbolic link"):
                _rustgil.trace_start(dangling)
            fifo = os.path.join(d, "fifo.json")
            os.mkfifo(fifo)
            with self.assertRaisesRegex(OSError, "a FIFO"):
                _rustgil.trace_start(fifo)  # a blocking open would hang here
            with open(target) as f:
                self.assertEqual(f.read(), "precious")
            self.assertEqual(os.listdir(elsewhere), ["precious"], "nothing created through the dangling link")
            self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
            with self.assertRaises(ValueError):
                _rustgil.trace_start(os.path.join(d, ".json"))

    # ---- per-thread accounting, measure(), traces from the environment ----

    def test_thread_stats_are_keyed_by_ident_with_names(self):
        _rustgil.set_thread_stats(True)
        self.assertTrue(_rustgil.thread_stats_enabled())

        def work():
            spin(0.03)        # holds the GIL all along: nobody else wants it
            time.sleep(0.02)  # released around the call
        t = threading.Thread(target=work, name="worker-é")
        t.start()
        t.join()
        stats = _rustgil.thread_stats()
        s = stats[t.ident]
        self.assertEqual(s["name"], "worker-é", (t.ident, stats))
        self.assertFalse(s["alive"])
        # At least the 30 ms spin and the 20 ms sleep, less a little for
        # the clock reads at their edges. The spin is wall time: the main
        # thread may take the GIL in it (between start() and join(), longer
        # if the OS preempts it on a busy machine), so part of it can be
        # waiting rather than holding.
        self.assertGreaterEqual(s["hold_ns"] + s["wait_ns"], 29_000_000, s)
        self.assertGreater(s["hold_ns"], 0, s)
        self.assertGreaterEqual(s["call_ns"], 19_000_000, s)
        self.assertGreaterEqual(s["acquisitions"], 2)
        me = stats[threading.get_ident()]
        self.assertEqual(me["name"], "MainThread", stats)
        self.assertTrue(me["alive"])

    def test_measure_splits_a_block_into_wait_hold_and_calls(self):
        _rustgil.set_thread_stats(True)
        stop = threading.Event()
        spinner = threading.Thread(target=lambda: [spin(0.001) for _ in iter(stop.is_set, True)])
        spinner.start()
        try:
            t0 = time.monotonic_ns()
            with _rustgil.measure() as m:
                spin(0.02)
                time.sleep(0.01)
                spin(0.02)
            elapsed = time.monotonic_ns() - t0
        finally:
            stop.set()
            spinner.join()
        # The states partition the block's time (both clocks are monotonic):
        # no more than the time around it, at least the spins and the sleep.
        # (How much less than `elapsed` depends on the OS scheduler between
        # t0 and the block, so no bound is asserted there.)
        total = m.wait_ns + m.hold_ns + m.call_ns
        self.assertLessEqual(total, elapsed, m)
        self.assertGreaterEqual(total, 49_000_000, m)
        self.assertGreaterEqual(m.call_ns, 10_000_000, m)
        self.assertGreater(m.wait_ns, 0, m)  # the spinner held the GIL at times
        self.assertGreaterEqual(m.acquisitions, 1)
        self.assertIn("wait_ns=", repr(m))
        _rustgil.set_thread_stats(False)
        try:
            with self.assertRaisesRegex(RuntimeError, "accounting is off"):
                with _rustgil.measure():
                    pass
        finally:
            _rustgil.set_thread_stats(True)

    def test_measure_counts_a_block_entered_right_after_accounting_goes_on(self):
        # One thread, in a fresh process and in a sub-interpreter with its
        # own GIL: the block never waits nor releases, so only a record
        # begun when the accounting went on (not at the thread's next lock
        # event) can count it. Both clocks are CLOCK_MONOTONIC.
        block = ("import _rustgil, os, time\n"
                 "def block():\n"
                 "    _rustgil.set_thread_stats(True)\n"
                 "    outer = time.monotonic_ns()\n"
                 "    with _rustgil.measure() as m:\n"
                 "        inner = time.monotonic_ns()\n"
                 "        while time.monotonic_ns() < inner + 20_000_000: pass\n"
                 "        inner = time.monotonic_ns() - inner\n"
                 "    outer = time.monotonic_ns() - outer\n"
                 "    return f'{m.wait_ns} {m.hold_ns} {m.call_ns} {inner} {outer} '\n")
        code = (f"BLOCK = {block!r}\n"
                "exec(BLOCK)\n"
                "import _interpreters\n"
                "main = block()\n"
                "r, w = os.pipe()\n"
                "interp = _interpreters.create('isolated')\n"
                "try:\n"
                "    failed = _interpreters.run_string(interp, BLOCK + f'os.write({w}, block().encode())')\n"
                "    assert failed is None, failed\n"
                "finally:\n"
                "    _interpreters.destroy(interp)\n"
                "os.close(w)\n"
                "print(main, os.read(r, 200).decode())\n")
        r = self.run_python(code, PYTHON_RUST_GIL=EXPECTED_POLICY)
        self.assertEqual(r.returncode, 0, r.stderr)
        values = [int(v) for v in r.stdout.split()]
        self.assertEqual(len(values), 10, r.stdout)
        for where, (wait, hold, call, inner, outer) in zip(("main", "sub-interpreter"),
                                                          (values[:5], values[5:])):
            m = dict(wait_ns=wait, hold_ns=hold, call_ns=call, inner=inner, outer=outer)
            self.assertGreater(hold, 0, f"{where}: {m}")
            # The record's clock reads lie between the block's edges.
            self.assertLessEqual(inner, wait + hold + call, f"{where}: {m}")
            self.assertLessEqual(wait + hold + call, outer, f"{where}: {m}")

    def test_an_explicit_name_wins_over_threadings(self):
        # The main thread, in a child (this one keeps "MainThread" for the
        # other tests): a name given while the accounting is off, the
        # issue's one-liner, a later name replacing it, and a trace's row.
        import json
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "gil.json")
            code = ("import _rustgil, json, threading, time\n"
                    "me = threading.get_ident()\n"
                    "_rustgil.name_thread('early')\n"
                    "_rustgil.set_thread_stats(True); time.sleep(.001)\n"
                    "names = [_rustgil.thread_stats()[me]['name']]\n"
                    "_rustgil.name_thread('mine')\n"
                    "names.append(_rustgil.thread_stats()[me]['name'])\n"
                    f"_rustgil.trace_start({path!r}); time.sleep(.001)\n"
                    "_rustgil.trace_stop()\n"
                    "names.append(_rustgil.thread_stats()[me]['name'])\n"
                    "print(json.dumps(names))\n")
            r = self.run_python(code, PYTHON_RUST_GIL=EXPECTED_POLICY)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        self.assertEqual(json.loads(r.stdout), ["early", "mine", "mine"])
        rows = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
        self.assertIn("mine", rows)
        self.assertFalse(any(n.startswith("MainThread") for n in rows), rows)

    def test_a_threads_own_name_wins_for_its_life(self):
        import json
        import tempfile
        _rustgil.set_thread_stats(True)
        named, go = threading.Event(), threading.Event()

        def work():
            _rustgil.name_thread("mine")
            named.set()
            go.wait()
            _rustgil.name_thread("mine, renamed")

        t = threading.Thread(target=work, name="threading-name")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "gil.json")
            _rustgil.trace_start(path)
            try:
                t.start()
                self.assertTrue(named.wait(60))
                alive = _rustgil.thread_stats()[t.ident]["name"]
            finally:
                _rustgil.trace_stop()  # names the rows of the live threads
                go.set()
                t.join()
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        ended = _rustgil.thread_stats()[t.ident]["name"]
        self.assertEqual((alive, ended), ("mine", "mine, renamed"))
        rows = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
        self.assertIn("mine", rows)
        self.assertFalse(any(n.startswith("threading-name") for n in rows), rows)
        with self.assertRaises(TypeError):
            _rustgil.name_thread(b"bytes")
        with self.assertRaises(ValueError):
            _rustgil.name_thread("nul\0inside")

    def test_the_documented_wsgi_middleware_reports_gil_time(self):
        # The example in docs/observability.md, run as it is written there.
        _rustgil.set_thread_stats(True)
        doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "observability.md")
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        code = text.split("<!-- middleware -->\n```python\n", 1)[1].split("```", 1)[0]
        self.assertLessEqual(len(code.strip().splitlines()), 25)
        namespace = {}
        exec(code, namespace)
        logged = []

        def app(environ, start_response):
            start_response("200 OK", [("Content-Type", "text/plain")])
            spin(0.005)
            time.sleep(0.002)
            return [b"hello"]

        wrapped = namespace["GilTimeMiddleware"](app, lambda **record: logged.append(record))
        stop = threading.Event()
        spinner = threading.Thread(target=lambda: [spin(0.001) for _ in iter(stop.is_set, True)])
        spinner.start()
        try:
            for i in range(5):
                body = b"".join(wrapped({"PATH_INFO": f"/r{i}"}, lambda status, headers: None))
                self.assertEqual(body, b"hello")
        finally:
            stop.set()
            spinner.join()
        self.assertEqual([r["path"] for r in logged], [f"/r{i}" for i in range(5)])
        for r in logged:
            self.assertGreaterEqual(r["in_calls_ms"], 2.0, r)
            self.assertGreater(r["held_ms"], 0, r)
            self.assertGreaterEqual(r["waited_ms"], 0, r)
        self.assertGreater(sum(r["waited_ms"] for r in logged), 0, logged)

    def env_trace(self, code, value, *options):
        r = self.run_python(code, *options, PYTHON_RUST_GIL=value)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_a_trace_from_the_environment_has_every_threads_row(self):
        import json
        import tempfile
        # The program never imports _rustgil: the names come from the
        # core's audit hook, which loads the module's namer itself at the
        # first thread start.
        code = ("import os, sys, threading, time\n"
                "imported = '_rustgil' in sys.modules\n"
                "def work():\n"
                "    end = time.monotonic() + 0.02\n"
                "    while time.monotonic() < end: pass\n"
                "    time.sleep(0.005)\n"
                "ts = [threading.Thread(target=work, name=n) for n in ('alpha', 'beta', 'gamma')]\n"
                "[t.start() for t in ts]; [t.join() for t in ts]\n"
                "print(os.getpid(), imported)\n")
        with tempfile.TemporaryDirectory() as d:
            r = self.env_trace(code, f"{EXPECTED_POLICY},trace={d}/gil-%p.json")
            pid, imported = r.stdout.split()
            self.assertEqual(imported, "False", "nothing imported _rustgil before the threads started")
            self.assertEqual(os.listdir(d), [f"gil-{pid}.json"])
            with open(os.path.join(d, f"gil-{pid}.json"), encoding="utf-8") as f:
                doc = json.load(f)
        self.assertIn(f"pid {pid}", doc["otherData"]["title"])
        rows = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
        self.assertLessEqual({"alpha", "beta", "gamma", "MainThread"}, set(rows.values()), rows)
        running = {rows[e["tid"]] for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "running"}
        self.assertLessEqual({"alpha", "beta", "gamma", "MainThread"}, running)
        self.assertFalse(doc["otherData"]["ring"])

    def test_a_ring_trace_from_the_environment_keeps_the_last_events(self):
        import json
        import tempfile
        code = "import time\nfor _ in range(200): time.sleep(0.0001)\n"
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "gil.json")
            self.env_trace(code, f"{EXPECTED_POLICY},trace={path},trace_ring=50")
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        self.assertTrue(doc["otherData"]["ring"])
        self.assertEqual(doc["otherData"]["events"], 50)
        self.assertGreater(doc["otherData"]["dropped_events"], 300)

    @unittest.skipUnless(hasattr(signal, "SIGINT") and os.name == "posix", "needs POSIX signals")
    def test_a_trace_from_the_environment_is_written_on_an_uncaught_keyboard_interrupt(self):
        # Python ends on an uncaught KeyboardInterrupt (Ctrl-C, SIGINT) by
        # finalizing, then killing itself with SIGINT: exit(3) and its
        # handlers never run. A SIGTERM handler that raises SystemExit
        # ends through exit(3).
        import json
        import tempfile
        cases = [
            ("SIGINT", -signal.SIGINT, "os.kill(os.getpid(), signal.SIGINT); time.sleep(60)\n"),
            ("KeyboardInterrupt", -signal.SIGINT, "raise KeyboardInterrupt\n"),
            ("SIGTERM to sys.exit", 3, "signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
                                       "os.kill(os.getpid(), signal.SIGTERM); time.sleep(60)\n"),
        ]
        for what, status, end in cases:
            with self.subTest(what), tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "gil.json")
                code = ("import os, signal, sys, threading, time\n"
                        "t = threading.Thread(target=time.sleep, args=(0.001,), name='worker')\n"
                        "t.start(); t.join()\n" + end)
                r = self.run_python(code, PYTHON_RUST_GIL=f"{EXPECTED_POLICY},trace={path}")
                self.assertEqual(r.returncode, status, r.stderr)
                self.assertTrue(os.path.exists(path), f"ended by {what}: no trace file")
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                self.assertTrue(text, f"ended by {what}: the trace file is empty")
                doc = json.loads(text)
                names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
                self.assertLessEqual({"worker", "MainThread"}, names)

    @unittest.skipUnless(hasattr(os, "fork"), "needs fork")
    def test_a_fork_child_writes_its_own_trace(self):
        import json
        import tempfile
        code = ("import os, threading\n"
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    t = threading.Thread(target=sum, args=(range(10**5),), name='child-worker')\n"
                "    t.start(); t.join()\n"
                "else:\n"
                "    os.waitpid(pid, 0)\n"
                "    print(os.getpid(), pid)\n")
        with tempfile.TemporaryDirectory() as d:
            r = self.env_trace(code, f"{EXPECTED_POLICY},trace={d}/gil-%p.json")
            parent, child = r.stdout.split()
            self.assertEqual(sorted(os.listdir(d)), sorted([f"gil-{parent}.json", f"gil-{child}.json"]))
            with open(os.path.join(d, f"gil-{child}.json"), encoding="utf-8") as f:
                doc = json.load(f)
            names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
            self.assertIn("child-worker", names)
            self.assertIn(f"pid {child}", doc["otherData"]["title"])
            # Without %p the child does not trace (it would write the parent's file).
            r = self.env_trace(code, f"{EXPECTED_POLICY},trace={d}/one.json")
            with open(os.path.join(d, "one.json"), encoding="utf-8") as f:
                doc = json.load(f)
            self.assertIn(f"pid {r.stdout.split()[0]}", doc["otherData"]["title"])

    def test_stats_from_the_environment(self):
        r = self.env_trace("import _rustgil; print(_rustgil.thread_stats_enabled())",
                           f"{EXPECTED_POLICY},stats=1")
        self.assertEqual(r.stdout.strip(), "True")

    def test_bad_trace_options_are_startup_errors(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            for bad, message in [
                (f"priority,trace={d}/t.txt", "must end in .json"),
                ("priority,trace=", "trace needs a file name"),
                (f"priority,trace={d}/t-%d.json", "% must be followed by p"),
                (f"priority,trace={d}/no/such/dir/t.json", f"the GIL trace file '{d}/no/such/dir/t.json' "
                 "cannot be created"),
                (f"priority,trace={d}/a.json,trace={d}/b.json", "trace is given twice"),
                ("priority,trace_ring=10", "trace_ring needs trace=PATH"),
                (f"priority,trace={d}/t.json,trace_ring=0", "trace_ring must be a number of events"),
                ("priority,stats=2", "stats must be 0 or 1, not '2'"),
            ]:
                self.assertStartupError(bad, message)
            self.assertEqual(os.listdir(d), [])

    def test_the_report_module_prints_a_table_and_writes_a_timeline(self):
        import tempfile
        script = ("import threading, time\n"
                  "def work():\n"
                  "    end = time.monotonic() + 0.02\n"
                  "    while time.monotonic() < end: pass\n"
                  "ts = [threading.Thread(target=work, name=f'job-{i}') for i in range(2)]\n"
                  "[t.start() for t in ts]; [t.join() for t in ts]\n")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "work.py")
            with open(path, "w") as f:
                f.write(script)
            svg = os.path.join(d, "t.svg")
            r = run_child([sys.executable, "-m", "rustgil", "-o", svg, path])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(svg, encoding="utf-8") as f:
                picture = f.read()
            bad = run_child([sys.executable, "-m", "rustgil", "-o", os.path.join(d, "t.txt"), path])
            # Options after -m MODULE are the module's (-o too), as for python.
            data = os.path.join(d, "d.json")
            with open(data, "w") as f:
                f.write('{"b": 1, "a": 2}')
            mod = run_child([sys.executable, "-m", "rustgil", "-o", os.path.join(d, "m.svg"), "-m",
                             "json.tool", "--sort-keys", "--compact", data])
            self.assertEqual(mod.returncode, 0, mod.stderr)
            self.assertEqual(mod.stdout.strip(), '{"a":2,"b":1}')
            self.assertTrue(os.path.exists(os.path.join(d, "m.svg")))
        header = r.stderr.splitlines()[0].split()
        self.assertEqual(header[:3], ["thread", "wait", "ms"])
        for name in ("job-0", "job-1", "MainThread", "total"):
            self.assertIn(name, r.stderr)
        self.assertIn("job-0", picture)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("must end in .json", bad.stderr)
        # The table ends with a line that reads it for the user.
        lines = r.stderr.splitlines()
        over = next(i for i, line in enumerate(lines) if line.startswith("over "))
        self.assertTrue(lines[over + 1].startswith("reading: threads spent "), r.stderr)
        # The GIL as a text that runs it again, in the report and the picture.
        self.assertIn(f"rustgil: GIL options {_rustgil.options()}", lines)
        self.assertIn(f"GIL options {_rustgil.options()}", picture)

    def test_the_report_reads_the_table_for_the_user(self):
        import rustgil
        def stats(*threads):
            return {i: {"wait_ns": w, "hold_ns": h, "call_ns": c} for i, (w, h, c) in enumerate(threads)}
        ms = 1_000_000
        # Two CPU threads sharing the GIL: each waits half its time.
        bound = rustgil.read_table(stats((50 * ms, 50 * ms, 0), (50 * ms, 50 * ms, 0)), 100 * ms)
        self.assertIn("50% of their time waiting for the GIL, which was held 100% of the time", bound)
        self.assertIn("bound by the GIL; more threads will not make it faster", bound)
        some = rustgil.read_table(stats((15 * ms, 45 * ms, 40 * ms)), 100 * ms)
        self.assertIn("visible cost", some)
        idle = rustgil.read_table(stats((1 * ms, 10 * ms, 89 * ms), (0, 5 * ms, 95 * ms)), 100 * ms)
        self.assertIn("not what limits this program", idle)
        self.assertIsNone(rustgil.read_table({}, 100 * ms))

    def test_the_report_module_refuses_what_python_refuses(self):
        # A missing script: one line, status 2, as `python missing.py`; a
        # missing module: one line, status 1, as `python -m missing`; and
        # neither a table nor a timeline.
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            missing = os.path.join(d, "nonexistent.py")
            run = lambda *args: run_child([sys.executable, *args], cwd=d)
            python, script = run(missing), run("-m", "rustgil", missing)
            python_m, module = run("-m", "no_such_module_here"), run("-m", "rustgil", "-m", "no_such_module_here")
            written = os.listdir(d)
        self.assertEqual((python.returncode, python_m.returncode), (2, 1))
        self.assertEqual(script.returncode, python.returncode, script.stderr)
        self.assertEqual(len(script.stderr.splitlines()), 1, script.stderr)
        self.assertIn(f"can't open file {missing!r}", script.stderr)
        self.assertEqual(module.returncode, python_m.returncode, module.stderr)
        self.assertEqual(len(module.stderr.splitlines()), 1, module.stderr)
        self.assertIn("no_such_module_here", module.stderr)
        self.assertEqual(written, [])

    @unittest.skipUnless(EXPECTED_POLICY.endswith("monitor"), "needs the monitor thread")
    def test_the_monitor_works_and_sleeps_when_idle(self):
        before = _rustgil.counters()
        threads = [threading.Thread(target=spin, args=(0.1,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertGreater(_rustgil.counters()["drop_requests"], before["drop_requests"])
        self.assertGreater(_rustgil.monitor_wakeups(), 0)
        # Its last look finds nobody waiting; on a busy machine that look
        # may come late: wait until the count stands still for 0.2 s (a
        # monitor that kept waking up would not, and the check below says so).
        idle = _rustgil.monitor_wakeups()
        for _ in range(150):
            time.sleep(0.2)
            if _rustgil.monitor_wakeups() == idle:
                break
            idle = _rustgil.monitor_wakeups()
        time.sleep(0.3)
        self.assertEqual(_rustgil.monitor_wakeups(), idle, "the monitor woke up with nobody waiting")

    def test_blocking_calls_release_with_the_policy_in_force(self):
        before = _rustgil.counters()
        for _ in range(50):
            time.sleep(0)  # a voluntary release and re-acquire each
        after = _rustgil.counters()
        if "lazy" in EXPECTED_POLICY:
            self.assertGreaterEqual(after["lazy_releases"] - before["lazy_releases"], 50)
        else:
            self.assertEqual(after["lazy_releases"], 0)

    def test_switch_interval_goes_through_to_the_library(self):
        old = sys.getswitchinterval()
        try:
            sys.setswitchinterval(0.0015)
            self.assertAlmostEqual(_rustgil.switch_interval(), 0.0015)
            self.assertAlmostEqual(sys.getswitchinterval(), 0.0015)
            with self.assertRaises(ValueError):
                sys.setswitchinterval(0)
        finally:
            sys.setswitchinterval(old)

    def test_switch_interval_is_kept_as_given_like_stock(self):
        # Stock CPython keeps any interval; the lock itself waits at most an
        # hour between drop requests, which is all _rustgil reports.
        old = sys.getswitchinterval()
        try:
            for given, lock in [(1e9, 3600.0), (3600.5, 3600.0), (3600.0, 3600.0), (1e-6, 1e-6),
                                (1e-7, 0.0)]:  # below 1 µs: 0, as stock (the lock waits 1 µs)
                sys.setswitchinterval(given)
                self.assertEqual(sys.getswitchinterval(), given if given >= 1e-6 else 0.0, given)
                self.assertEqual(_rustgil.switch_interval(), lock, given)
        finally:
            sys.setswitchinterval(old)

    @unittest.skipUnless(os.environ.get("STOCK_PYTHON"), "set STOCK_PYTHON to a stock CPython of this version")
    def test_switch_interval_matches_stock(self):
        code = ("import sys\n"
                "for v in ['1e9', '3600.5', '1e30', 'nan', 'inf', '-inf', '1e-7', '1e-6', '0', '-1']:\n"
                "    try:\n"
                "        sys.setswitchinterval(float(v)); print(v, repr(sys.getswitchinterval()))\n"
                "    except Exception as e:\n"
                "        print(v, type(e).__name__, e)\n")
        runs = [run_child([python, "-c", code])
                for python in (os.environ["STOCK_PYTHON"], sys.executable)]
        for r in runs:
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(runs[1].stdout, runs[0].stdout)

    def run_python(self, code, *options, **env):
        """Runs code in a child of this interpreter, with python options
        (e.g. -X rust_gil=...) and env on top of this process's environment
        without its policy variables."""
        base = {k: v for k, v in os.environ.items() if k not in POLICY_VARIABLES}
        return run_child([sys.executable, *options, "-c", code], env={**base, **env})

    def test_default_policy_is_the_builds(self):
        import sysconfig
        r = self.run_python("import _rustgil; print(_rustgil.policy())")
        self.assertEqual(r.returncode, 0, r.stderr)
        default = sysconfig.get_config_var("RUST_GIL_DEFAULT_POLICY")
        self.assertEqual(sysconfig.get_config_var("Py_RUST_GIL"), 1)
        self.assertEqual(r.stdout.strip(), default.split(",")[0])
        # cpython/build.sh builds with the default of --with-rust-gil-policy.
        self.assertEqual(default, os.environ.get("RUSTGIL_BUILD_DEFAULT", "priority"))

    def test_environment_selects_the_policy(self):
        self.assertEqual(_rustgil.presets(),
                         ("classic", "priority", "lazy", "priority-lazy", "monitor", "priority-monitor",
                          "priority-lazy-monitor"))
        for name in _rustgil.presets():
            r = self.run_python("import _rustgil; print(_rustgil.policy())", PYTHON_RUST_GIL=name)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), name)

    def test_x_option_selects_the_policy_before_the_environment(self):
        code = "import _rustgil; print(_rustgil.policy(), _rustgil.laps())"
        for options, env, expected in [
            (["-X", "rust_gil=classic"], {}, "classic 0"),
            (["-X", "rust_gil=priority,laps=2"], {"PYTHON_RUST_GIL": "lazy"}, "priority 2"),
            (["-X", "rust_gil=monitor"], {"PYTHONRUSTGIL": "no-such-policy"}, "monitor 0"),
            # -E and -I ignore the variables, not -X.
            (["-E", "-X", "rust_gil=classic"], {"PYTHON_RUST_GIL": "lazy"}, "classic 0"),
            (["-I", "-X", "rust_gil=classic"], {}, "classic 0"),
            # The first -X rust_gil wins, as the first -X gil does.
            (["-X", "rust_gil=lazy", "-X", "rust_gil=classic"], {}, "lazy 0"),
            # Other -X options leave it alone.
            (["-X", "rust_gil_x=classic", "-X", "dev"], {"PYTHON_RUST_GIL": "lazy"}, "lazy 0"),
        ]:
            r = self.run_python(code, *options, **env)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, expected), f"{options} {env}: {r.stderr}")
        for options, message in [
            (["-X", "rust_gil=no-such-policy"], "-X rust_gil='no-such-policy': unknown GIL policy"),
            (["-X", "rust_gil=priority,"], "-X rust_gil='priority,': a trailing ','"),
            (["-X", "rust_gil="], "-X rust_gil='': no GIL policy given"),
            (["-X", "rust_gil"], "-X rust_gil='': no GIL policy given"),
            (["-X", "rust_gil=priorit\u00e9"], "unknown GIL policy 'priorit\\xc3\\xa9'"),
        ]:
            r = self.run_python("print('should not run')", *options, PYTHON_RUST_GIL="classic")
            self.assertEqual(r.returncode, 1, f"{options}: {r.stderr}")
            self.assertNotIn("should not run", r.stdout)
            self.assertIn("Fatal Python error: ", r.stderr)
            self.assertIn(message, r.stderr, options)

    def test_long_option_texts_reach_the_library_whole(self):
        # Longer than any fixed buffer the shim had (1,024 bytes): each
        # route passes the whole text to the library.
        head = "classic,interval_us="
        good = head + "0" * (1024 - len(head) - 4) + "5000"
        bad = head + "0" * (1029 - len(head) - 4 - len(",nosuch=1")) + "5000,nosuch=1"
        self.assertEqual((len(good), len(bad)), (1024, 1029))
        code = "import sys; print(sys.getswitchinterval())"
        for options, env in [(["-X", f"rust_gil={good}"], {}), ([], {"PYTHON_RUST_GIL": good})]:
            r = self.run_python(code, *options, **env)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "0.005"), f"{options} {env}: {r.stderr}")
        for options, env, source in [(["-X", f"rust_gil={bad}"], {}, "-X rust_gil"),
                                     ([], {"PYTHON_RUST_GIL": bad}, "PYTHON_RUST_GIL")]:
            r = self.run_python("print('should not run')", *options, **env)
            self.assertEqual(r.returncode, 1, f"{source}: {r.stderr}")
            self.assertNotIn("should not run", r.stdout)
            # The library shows a long value shortened, then the fault.
            self.assertIn(f"{source}='{head}000", r.stderr)
            self.assertIn("': unknown option 'nosuch'", r.stderr)

    def test_old_variable_name_still_works(self):
        code = "import _rustgil; print(_rustgil.policy())"
        for env, expected in [
            ({"PYTHONRUSTGIL": "classic"}, "classic"),
            ({"PYTHONRUSTGIL": "classic", "PYTHON_RUST_GIL": "lazy"}, "lazy"),
            # Empty is unset, as for every PYTHON* variable.
            ({"PYTHONRUSTGIL": "classic", "PYTHON_RUST_GIL": ""}, "classic"),
        ]:
            r = self.run_python(code, **env)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, expected), f"{env}: {r.stderr}")
        r = self.run_python("print('should not run')", PYTHONRUSTGIL="priority,")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("PYTHONRUSTGIL='priority,': a trailing ','", r.stderr)

    def assertStartupError(self, value, message):
        """PYTHON_RUST_GIL=value stops start-up as a bad PYTHONMALLOC does:
        the message on stderr, exit status 1 (no abort, no core file)."""
        r = self.run_python("print('should not run')", PYTHON_RUST_GIL=value)
        self.assertEqual(r.returncode, 1, f"{value!r}: {r.stderr}")
        self.assertNotIn("should not run", r.stdout)
        self.assertIn("Fatal Python error: ", r.stderr, value)
        self.assertIn(message, r.stderr, value)

    def test_environment_options_tune_the_policy(self):
        code = ("import _rustgil as g; "
                "print(g.policy(), round(g.lazy_release() * 1e6), round(g.spin() * 1e6), g.laps())")
        for value, expected in [("priority-lazy,lazy_us=30,spin_us=20", "priority-lazy 30 20 0"),
                                ("priority-lazy,spin_us=20,lazy_us=30", "priority-lazy 30 20 0"),
                                ("priority,spin_us=0", "priority 0 0 0"),
                                ("priority,spin_us=200", "priority 0 200 0"),
                                # The priority presets' spin when none is given.
                                ("priority,laps=3", "priority 0 50 3"),
                                ("priority-lazy-monitor", "priority-lazy-monitor 50 50 0"),
                                ("monitor,laps=16", "monitor 0 0 16"),
                                ("classic", "classic 0 0 0")]:
            r = self.run_python(code, PYTHON_RUST_GIL=value)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, expected), r.stderr)
        for bad, message in [
            ("priority,lazy_us=30", "lazy_us needs a policy with lazy release"),
            ("priority-lazy,lazy_us=0", "lazy_us must be a number of microseconds from 1 to 3600000000, not '0'"),
            ("priority,spin_us=10001", "spin_us must be a number"),
            ("priority,spin_us=-1", "spin_us must be a number of microseconds from 0 to 10000, not '-1'"),
            ("priority,spin_us=+5", "not '+5'"),
            ("priority,spin_us= 5", "not ' 5'"),
            ("priority,spin_us=99999999999999999999999", "spin_us must be a number"),
            ("priority,spin", "'spin' is not KEY=VALUE"),
            ("priority,fast=1", "unknown option 'fast'"),
            ("priority, spin_us=5", "unknown option ' spin_us'"),
            ("priority,laps=17", "laps must be a number from 0 to 16, not '17'"),
            ("priority,laps=x", "laps must be a number from 0 to 16, not 'x'"),
            ("classic,laps=3", "laps needs a policy that bounds overtaking"),
            ("lazy,laps=3", "laps needs a policy that bounds overtaking"),
            ("priority,laps=3,laps=3", "laps is given twice"),
        ]:
            self.assertStartupError(bad, message)

    def test_interval_option_is_the_starting_switch_interval(self):
        # interval_us=N: as if sys.setswitchinterval(N / 1e6) ran first;
        # sys.setswitchinterval still changes it later.
        code = ("import sys, _rustgil as g; a = sys.getswitchinterval(); sys.setswitchinterval(0.01); "
                "print(round(a * 1e6), g.policy(), round(sys.getswitchinterval() * 1e6))")
        for value, expected in [("priority,interval_us=2000", "2000 priority 10000"),
                                ("classic", "5000 classic 10000")]:
            r = self.run_python(code, PYTHON_RUST_GIL=value)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, expected), r.stderr)
        self.assertStartupError("priority,interval_us=3600000001", "interval_us must be a number of microseconds")
        self.assertStartupError("priority,interval_us=1,interval_us=1", "interval_us is given twice")

    def test_environment_grammar_is_strict(self):
        for bad, message in [
            ("priority,", "PYTHON_RUST_GIL='priority,': a trailing ','"),
            ("priority,spin_us=5,", "a trailing ','"),
            ("priority,,spin_us=5", "an empty option ',,'"),
            (",spin_us=5", "no GIL policy before ','"),
            (",", "no GIL policy before ','"),
            ("priority,=5", "'=5' has no key"),
            ("priority,spin_us=", "spin_us must be a number of microseconds from 0 to 10000, not ''"),
            ("priority-lazy,lazy_us=", "lazy_us must be a number"),
            ("priority,spin_us=5,spin_us=6", "spin_us is given twice"),
            ("priority-lazy,lazy_us=5,lazy_us=5", "lazy_us is given twice"),
        ]:
            self.assertStartupError(bad, message)

    def test_bad_value_is_echoed_escaped(self):
        for bad, shown in [
            ("priority\x7f", "PYTHON_RUST_GIL='priority\\x7f': unknown GIL policy 'priority\\x7f'"),
            ("prio\trity", "unknown GIL policy 'prio\\trity'"),
            ("priority\x1b[2J", "unknown GIL policy 'priority\\x1b[2J'"),
            ("priorit\u00e9", "unknown GIL policy 'priorit\\xc3\\xa9'"),
            ("it's", "unknown GIL policy 'it\\'s'"),
            ("priority,spin_us=1\n", "not '1\\n'"),
            ("x" * 5000, "..."),
        ]:
            self.assertStartupError(bad, shown)

    def test_unknown_policy_is_a_startup_error(self):
        self.assertStartupError("no-such-policy", "PYTHON_RUST_GIL='no-such-policy': unknown GIL policy "
                                "'no-such-policy' (known: classic, priority, lazy,")
        # -E and -I ignore PYTHON* variables, these included.
        for option in ("-E", "-I"):
            for name in POLICY_VARIABLES:
                r = self.run_python("print('ok')", option, **{name: "no-such-policy"})
                self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), f"{option} {name}: {r.stderr}")

    def test_subinterpreters_keep_the_policy_read_at_startup(self):
        # The policy is read once, when the main interpreter creates its
        # GIL: a later change to os.environ does not reach a sub-interpreter
        # with its own GIL, and a bad value there cannot end the process.
        code = """if True:
            import _interpreters, _rustgil, os
            for later in ("no-such-policy", "classic", "priority,"):
                os.environ["PYTHON_RUST_GIL"] = later
                r, w = os.pipe()
                interp = _interpreters.create("isolated")
                try:
                    _interpreters.run_string(interp, f"import _rustgil, os; os.write({w}, _rustgil.policy().encode())")
                finally:
                    _interpreters.destroy(interp)
                os.close(w)
                print(later, os.read(r, 100).decode())
                os.close(r)
        """
        r = self.run_python(code, PYTHON_RUST_GIL=EXPECTED_POLICY)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["no-such-policy", EXPECTED_POLICY, "classic", EXPECTED_POLICY,
                                            "priority,", EXPECTED_POLICY])

    def test_subinterpreter_with_its_own_gil_has_its_own_lock(self):
        import _interpreters
        r, w = os.pipe()
        interp = _interpreters.create("isolated")
        try:
            _interpreters.run_string(interp, f"""if True:
                import _rustgil, os
                c = _rustgil.counters()
                os.write({w}, f"{{_rustgil.policy()}} {{c['acquisitions']}}".encode())
            """)
        finally:
            _interpreters.destroy(interp)
        os.close(w)
        policy, acquisitions = os.read(r, 100).decode().split()
        os.close(r)
        self.assertEqual(policy, EXPECTED_POLICY)
        # A fresh lock: a handful of acquisitions, far fewer than the main one's.
        self.assertLess(int(acquisitions), _rustgil.counters()["acquisitions"])

    def test_fork_child_has_a_working_lock(self):
        parent = _rustgil.counters()
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                c = _rustgil.counters()  # fresh counters: a re-initialised lock
                t = threading.Thread(target=spin, args=(0.05,))
                t.start()
                spin(0.05)
                t.join()
                ok = (c["acquisitions"] < min(10, parent["acquisitions"])
                      and _rustgil.counters()["switches"] > c["switches"])
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)

    def run_fork_from_thread(self, mode, runs):
        """cpython/fork_from_thread.py in a session of its own: a hang of the
        script or of a child it forked fails the test, never blocks it, and
        nothing it forked outlives it."""
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fork_from_thread.py")
        p = subprocess.Popen([sys.executable, script, mode, str(runs), "10"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            out = "(timed out after 120 s)"
        finally:
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
            p.wait()
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("every child exited", out)

    def test_fork_from_a_thread_child_ends_when_that_thread_returns(self):
        # The forking thread is the child's only thread: when it returns, the
        # child must end. A library thread left in the child (a monitor)
        # would keep it alive forever with a zombie leader.
        self.run_fork_from_thread("return", 2)

    def test_fork_from_a_thread_child_with_threads_ends_when_that_thread_returns(self):
        # The same, but the child contends for its GIL first (a thread of
        # its own, joined before the return).
        self.run_fork_from_thread("threads-return", 2)

    def test_fork_from_a_thread_child_exits(self):
        # The same, with os._exit(0) in the child, repeated: the child must
        # never hang between fork() and its exit.
        self.run_fork_from_thread("exit", 25)
        self.run_fork_from_thread("threads-exit", 10)

    @staticmethod
    def debug_offsets():
        """Where the fields of _PyRuntime.debug_offsets (_Py_DebugOffsets)
        that this test reads are, by name: its layout up to the GIL's
        fields (pycore_runtime.h in 3.13, pycore_debug_offsets.h in 3.14,
        which added interpreter_state.threads_main)."""
        fields = ["cookie", "version", "free_threaded",
                  "runtime_state.size", "runtime_state.finalizing",
                  "runtime_state.interpreters_head",
                  "interpreter_state.size", "interpreter_state.id", "interpreter_state.next",
                  "interpreter_state.threads_head"]
        if sys.version_info >= (3, 14):
            fields.append("interpreter_state.threads_main")
        fields += ["interpreter_state.gc", "interpreter_state.imports_modules",
                   "interpreter_state.sysdict", "interpreter_state.builtins",
                   "interpreter_state.ceval_gil", "interpreter_state.gil_runtime_state",
                   "interpreter_state.gil_runtime_state_enabled",
                   "interpreter_state.gil_runtime_state_locked",
                   "interpreter_state.gil_runtime_state_holder"]
        return {name: 8 * i for i, name in enumerate(fields)}

    def test_debug_offsets_show_the_holder(self):
        # Read _gil.locked and _gil.last_holder the way out-of-process
        # debuggers (py-spy) do: through _PyRuntime.debug_offsets.
        api = ctypes.pythonapi
        runtime = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
        u64 = lambda addr: ctypes.c_uint64.from_address(addr).value
        at = {name: u64(runtime + off) for name, off in self.debug_offsets().items() if name != "cookie"}
        self.assertEqual(ctypes.string_at(runtime, 8), b"xdebugpy")
        self.assertEqual(at["version"], sys.hexversion)
        self.assertEqual(at["free_threaded"], 0)
        interp = ctypes.c_void_p.from_address(runtime + at["runtime_state.interpreters_head"]).value
        # ceval.gil points at the interpreter's own _gil (a GIL of its own).
        self.assertEqual(u64(interp + at["interpreter_state.ceval_gil"]),
                         interp + at["interpreter_state.gil_runtime_state"])
        locked_off = at["interpreter_state.gil_runtime_state_locked"]
        holder_off = at["interpreter_state.gil_runtime_state_holder"]
        api.PyThreadState_Get.restype = ctypes.c_void_p

        def view():
            return (ctypes.c_int.from_address(interp + locked_off).value,
                    ctypes.c_void_p.from_address(interp + holder_off).value)

        seen = {}

        def worker():
            spin(0.02)
            seen["worker"] = (view(), api.PyThreadState_Get())

        t = threading.Thread(target=worker)
        t.start()
        spin(0.02)
        seen["main"] = (view(), api.PyThreadState_Get())
        t.join()
        for who, ((locked, holder), me) in seen.items():
            self.assertEqual(locked, 1, who)
            self.assertEqual(holder, me, f"{who}: _gil.last_holder is not the running thread")

    @unittest.skipUnless(sys.version_info >= (3, 14), "_remote_debugging is new in 3.14")
    def test_remote_debugging_sees_the_holder(self):
        # 3.14's profilers (_remote_debugging, PEP 768's machinery) read
        # another process's thread states and, with only_active_thread,
        # the GIL's holder through _Py_DebugOffsets. Two threads spin in
        # the child, taking turns; its main thread waits outside the GIL.
        # Each look must find one spinning thread holding the GIL (or the
        # GIL free for an instant), and over the looks both spinners.
        import _remote_debugging
        if not getattr(_remote_debugging, "PROCESS_VM_READV_SUPPORTED", True):
            self.skipTest("no process_vm_readv here")
        code = ("import sys, threading\n"
                "def spinner_a():\n"
                "    while True: pass\n"
                "def spinner_b():\n"
                "    while True: pass\n"
                "for f in (spinner_a, spinner_b):\n"
                "    threading.Thread(target=f, daemon=True).start()\n"
                "print('ready', flush=True)\n"
                "sys.stdin.read()\n")
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(child.stdout.readline(), "ready\n")
            try:
                everyone = _remote_debugging.RemoteUnwinder(child.pid, all_threads=True)
                holder = _remote_debugging.RemoteUnwinder(child.pid, only_active_thread=True)
                threads = everyone.get_stack_trace()
                holders = []
                for _ in range(200):
                    holders.append(holder.get_stack_trace())
                    time.sleep(0.005)
            except PermissionError:
                self.skipTest("not allowed to read another process's memory here")
        finally:
            child.kill()
            child.wait()
        self.assertEqual(len(threads), 3, threads)
        seen = set()
        for look in holders:
            self.assertLessEqual(len(look), 1, look)
            for thread in look:
                top = thread.frame_info[0].funcname
                self.assertIn(top, ("spinner_a", "spinner_b"), look)
                seen.add(top)
        self.assertEqual(seen, {"spinner_a", "spinner_b"}, "the holder never changed")

if __name__ == "__main__":
    unittest.main(verbosity=2)
