# Exits while other threads run, N of each kind (argv[1], default 3), when
# the main thread's exit cancels them (the unix port's mp_thread_deinit):
#   count   CPU-bound: each waits for the GIL or holds it in turn;
#   switch  in and out of the GIL: a blocking call (an uncontended lock)
#           in a loop, so each is often between a release and an acquire;
#   sleep   asleep outside the VM (a cancellation point);
#   blocked blocked outside the VM on a lock the main thread holds (no
#           cancellation point: the shim's threads are deferred-cancellable,
#           so these are not cancelled, and the exit must not wait for them).
# The process must end with status 0 after printing "exit".
# micropython/test.sh runs it many times.
import sys
import time
import _thread

stop = [False]
held = _thread.allocate_lock()
held.acquire()


def count():
    k = 0
    while not stop[0]:
        k += 1


def switch():
    mine = _thread.allocate_lock()
    while not stop[0]:
        mine.acquire()
        mine.release()


def sleep():
    while not stop[0]:
        time.sleep_ms(1)


def blocked():
    held.acquire()


n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
for _ in range(n):
    for kind in (count, switch, sleep, blocked):
        _thread.start_new_thread(kind, ())
time.sleep_ms(20)
print("exit")
