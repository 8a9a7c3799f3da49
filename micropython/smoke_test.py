# Smoke test of MicroPython on the rust-gil lock, run by the rustgil build:
#
#   MICROPY_RUST_GIL=POLICY RUSTGIL_EXPECTED_POLICY=POLICY micropython-rustgil smoke_test.py
#
# Each test asserts the property it is named after; the script prints one
# line per test and "OK" at the end, and exits 1 on the first failure.
# (MicroPython has no unittest in this build: plain functions and asserts.)
import os
import sys
import time

import _thread
import rustgil

EXPECTED = os.getenv("RUSTGIL_EXPECTED_POLICY") or "priority"


def spin_until(flag):
    n = 0
    while not flag[0]:
        n += 1
    return n


def start_spinner():
    """A CPU-bound thread; returns (stop flag, done flag, counter list)."""
    stop = [False]
    done = [False]
    count = [0]

    def run():
        count[0] = spin_until(stop)
        done[0] = True

    _thread.start_new_thread(run, ())
    return stop, done, count


def join(done, seconds=10):
    deadline = time.ticks_add(time.ticks_ms(), seconds * 1000)
    while not done[0]:
        assert time.ticks_diff(deadline, time.ticks_ms()) > 0, "a thread did not finish"
        time.sleep_ms(1)


def test_policy_is_the_one_asked_for():
    assert rustgil.policy() == EXPECTED, (rustgil.policy(), EXPECTED)
    assert EXPECTED in rustgil.presets()
    assert "classic" in rustgil.presets() and "priority" in rustgil.presets()


def test_a_lone_thread_never_lets_go():
    # The stock GIL unlocks and re-locks at every 32nd jump; on the lock
    # the periodic point only polls, so a loop without I/O acquires nothing.
    before = rustgil.counters()
    n = 0
    for i in range(200000):
        n += i
    after = rustgil.counters()
    assert after["acquisitions"] == before["acquisitions"], (before, after)
    assert after["drop_requests"] == before["drop_requests"], (before, after)


def test_two_cpu_threads_both_run_and_are_switched_by_force():
    before = rustgil.counters()
    stop, done, count = start_spinner()
    mine = 0
    t0 = time.ticks_ms()
    while time.ticks_diff(time.ticks_ms(), t0) < 300:
        mine += 1
    stop[0] = True
    join(done)
    after = rustgil.counters()
    assert mine > 0 and count[0] > 0, (mine, count[0])
    assert after["drop_requests"] > before["drop_requests"], (before, after)
    assert after["forced_switches"] > before["forced_switches"], (before, after)


def test_io_thread_beside_a_spinner_is_served():
    before = rustgil.counters()
    stop, done, count = start_spinner()
    io_done = [False]
    slept = [0]

    def io():
        for _ in range(20):
            time.sleep_ms(1)
            slept[0] += 1
        io_done[0] = True

    _thread.start_new_thread(io, ())
    join(io_done)
    stop[0] = True
    join(done)
    after = rustgil.counters()
    assert slept[0] == 20
    if "priority" in EXPECTED:
        # An I/O-class waiter asks for the lock at once, not after an interval.
        assert after["preemptions"] > before["preemptions"], (before, after)


def test_switch_interval_set_and_refused():
    old = rustgil.switch_interval()
    assert old == 5000, old
    rustgil.switch_interval(1000)
    assert rustgil.switch_interval() == 1000
    # Above an hour: ValueError, or OverflowError where it does not fit in a
    # machine word (32-bit builds).
    for bad, error in ((0, ValueError), (-1, ValueError), (3600000001, (ValueError, OverflowError)),
                       (2**70, OverflowError), ("5", TypeError)):
        try:
            rustgil.switch_interval(bad)
            raise AssertionError("accepted %r" % (bad,))
        except error:
            pass
    assert rustgil.switch_interval() == 1000
    rustgil.switch_interval(old)


def test_sys_reports_a_gil():
    assert sys.implementation._thread == "GIL"


def test_threads_that_end_leave_the_lock_usable():
    # Each thread's last release is final; the main thread takes it after.
    done = []
    lock = _thread.allocate_lock()

    def short(i):
        with lock:
            done.append(i)

    for i in range(50):
        _thread.start_new_thread(short, (i,))
    deadline = time.ticks_add(time.ticks_ms(), 10000)
    while len(done) < 50:
        assert time.ticks_diff(deadline, time.ticks_ms()) > 0, len(done)
        time.sleep_ms(1)
    assert sorted(done) == list(range(50))


def main():
    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_")]
    for name, fn in tests:
        try:
            fn()
        except Exception as e:
            print("FAIL", name)
            sys.print_exception(e)
            sys.exit(1)
        print("ok  ", name)
    print("OK (%d tests, policy %s)" % (len(tests), rustgil.policy()))


main()
