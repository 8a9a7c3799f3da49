# Exits while N threads count (argv[1], default 3): they wait for the GIL or
# hold it in turn when the main thread's exit cancels them (the unix port's
# mp_thread_deinit, with asynchronous cancellation). The process must end
# with status 0. micropython/test.sh runs it many times.
import sys
import time
import _thread

stop = [False]


def count():
    k = 0
    while not stop[0]:
        k += 1


for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    _thread.start_new_thread(count, ())
time.sleep_ms(20)
print("exit")
