/*
 * The convoy effect through the C ABI, on any platform (POSIX threads or
 * Windows threads): a CPU-bound thread that answers drop requests beside a
 * thread that releases the lock around a short blocking call (a 1 ms
 * sleep, and until the CPU thread has taken the lock), under each preset
 * named on the command line. For each it prints the I/O thread's
 * re-acquire wait (median and 90th percentile, in units of the switch
 * interval) and how many of its re-acquires preempted the CPU thread, and
 * checks mutual exclusion exactly (a plain counter bumped under the lock).
 *
 *   convoy [--expect] PRESET...
 *
 * With --expect, fails unless "classic" shows the convoy (no preemption,
 * and a median re-acquire wait of at least half a switch interval: the
 * CPU thread keeps the lock until the interval's drop request) and every
 * "priority..." preset removes it (at least half the re-acquires preempt
 * the CPU thread at once). Both hold however loaded the machine is: a
 * load only lengthens classic's waits, and the preemptions are counted by
 * the lock, not timed. Other presets have no expectation (--expect refuses
 * them).
 */
#include <gil.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- platform layer: threads and a short sleep ----------------------- */
#ifdef _WIN32
#include <windows.h>
typedef HANDLE thread_t;
typedef DWORD(WINAPI *thread_fn)(void *);
#define THREAD_FN(name) static DWORD WINAPI name(void *arg)
#define THREAD_RETURN return 0
static int thread_start(thread_t *t, thread_fn fn, void *arg) {
    *t = CreateThread(NULL, 0, fn, arg, 0, NULL);
    return *t != NULL ? 0 : -1;
}
static void thread_join(thread_t t) {
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
}
static void sleep_1ms(void) { Sleep(1); }
#else
#include <pthread.h>
#include <time.h>
typedef pthread_t thread_t;
typedef void *(*thread_fn)(void *);
#define THREAD_FN(name) static void *name(void *arg)
#define THREAD_RETURN return NULL
static int thread_start(thread_t *t, thread_fn fn, void *arg) { return pthread_create(t, NULL, fn, arg); }
static void thread_join(thread_t t) { pthread_join(t, NULL); }
static void sleep_1ms(void) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}
#endif

#define ROUNDS 60

struct shared {
    gil_t *gil;
    atomic_bool stop;
    uint64_t bumps; /* under the lock only */
    uint64_t cpu_bumps, io_bumps;
    atomic_uint_fast64_t cpu_turns; /* times the CPU thread got the lock */
    uint64_t waits_ns[ROUNDS];
    int preempted; /* re-acquires that preempted the CPU thread */
    int failed;
};

static void fail(struct shared *s, const char *what, gil_result_t r) {
    fprintf(stderr, "convoy: %s: %s\n", what, gil_result_str(r));
    s->failed = 1;
}

/* Spins about `ns` of CPU under the lock. */
static void burn(uint64_t ns) {
    uint64_t end = gil_now_ns() + ns;
    while (gil_now_ns() < end) {
    }
}

THREAD_FN(cpu_thread) {
    struct shared *s = arg;
    int me;
    gil_result_t r = gil_acquire(s->gil, &me);
    if (r != GIL_OK) {
        fail(s, "cpu acquire", r);
        THREAD_RETURN;
    }
    atomic_fetch_add(&s->cpu_turns, 1);
    while (!atomic_load(&s->stop)) {
        burn(20000);
        s->bumps++;
        s->cpu_bumps++;
        if (gil_drop_requested(s->gil)) {
            bool yielded;
            r = gil_handle_drop_request(s->gil, &me, &yielded);
            if (r != GIL_OK) {
                fail(s, "handle drop request", r);
                break;
            }
            if (yielded) atomic_fetch_add(&s->cpu_turns, 1);
        }
    }
    r = gil_release(s->gil, &me, GIL_RELEASE_FINAL);
    if (r != GIL_OK) fail(s, "cpu release", r);
    THREAD_RETURN;
}

THREAD_FN(io_thread) {
    struct shared *s = arg;
    int me;
    gil_result_t r = gil_acquire(s->gil, &me);
    if (r != GIL_OK) {
        fail(s, "io acquire", r);
        THREAD_RETURN;
    }
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t turns = atomic_load(&s->cpu_turns);
        if ((r = gil_release(s->gil, &me, GIL_RELEASE_VOLUNTARY)) != GIL_OK) {
            fail(s, "io release", r);
            break;
        }
        /* The blocking call: 1 ms, and until the CPU thread holds the lock,
           so that every re-acquire finds it running, however late it was
           scheduled. */
        uint64_t deadline = gil_now_ns() + 10000000000ull;
        do {
            sleep_1ms();
        } while (atomic_load(&s->cpu_turns) == turns && gil_now_ns() < deadline);
        if (atomic_load(&s->cpu_turns) == turns) {
            fprintf(stderr, "convoy: the CPU thread did not take the free lock in 10 s\n");
            s->failed = 1;
            break;
        }
        gil_counters_t before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
        gil_get_counters(s->gil, &before);
        uint64_t t0 = gil_now_ns();
        if ((r = gil_acquire(s->gil, &me)) != GIL_OK) {
            fail(s, "io re-acquire", r);
            break;
        }
        s->waits_ns[i] = gil_now_ns() - t0;
        gil_get_counters(s->gil, &after);
        s->preempted += after.preemptions > before.preemptions;
        s->bumps++;
        s->io_bumps++;
    }
    atomic_store(&s->stop, true);
    if ((r = gil_release(s->gil, &me, GIL_RELEASE_FINAL)) != GIL_OK) fail(s, "io release", r);
    THREAD_RETURN;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

struct outcome {
    double median; /* re-acquire wait, in switch intervals */
    int preempted; /* re-acquires that preempted the CPU thread */
};

/* Runs one preset; its outcome, or a negative median on failure. */
static struct outcome run(const char *preset) {
    static struct shared s;
    struct outcome failed = {-1.0, 0};
    memset(&s, 0, sizeof s);
    atomic_init(&s.stop, false);
    atomic_init(&s.cpu_turns, 0);
    gil_config_t config;
    gil_result_t r = gil_config_preset(preset, &config);
    if (r != GIL_OK) {
        fprintf(stderr, "convoy: preset %s: %s\n", preset, gil_result_str(r));
        return failed;
    }
    if ((r = gil_new(&config, &s.gil)) != GIL_OK) {
        fprintf(stderr, "convoy: gil_new: %s\n", gil_result_str(r));
        return failed;
    }
    thread_t cpu, io;
    if (thread_start(&io, io_thread, &s) != 0) return failed;
    if (thread_start(&cpu, cpu_thread, &s) != 0) return failed;
    thread_join(io);
    thread_join(cpu);
    double interval_ns = (double)config.switch_interval_us * 1000.0;
    gil_free(s.gil);
    if (s.failed) return failed;
    if (s.bumps != s.cpu_bumps + s.io_bumps || s.io_bumps != ROUNDS) {
        fprintf(stderr, "convoy: %s: mutual exclusion broken: %llu bumps, %llu + %llu expected\n", preset,
                (unsigned long long)s.bumps, (unsigned long long)s.cpu_bumps, (unsigned long long)s.io_bumps);
        return failed;
    }
    qsort(s.waits_ns, ROUNDS, sizeof s.waits_ns[0], cmp_u64);
    double median = (double)s.waits_ns[ROUNDS / 2] / interval_ns;
    double p90 = (double)s.waits_ns[ROUNDS * 9 / 10] / interval_ns;
    printf("%-14s interval %6llu us | re-acquire wait after a 1 ms sleep: median %.3f, p90 %.3f intervals "
           "(%.0f / %.0f us), %d of %d preempted | exclusion exact: %llu bumps (cpu %llu, io %llu)\n",
           preset, (unsigned long long)config.switch_interval_us, median, p90,
           (double)s.waits_ns[ROUNDS / 2] / 1000.0, (double)s.waits_ns[ROUNDS * 9 / 10] / 1000.0, s.preempted,
           ROUNDS, (unsigned long long)s.bumps, (unsigned long long)s.cpu_bumps, (unsigned long long)s.io_bumps);
    fflush(stdout);
    struct outcome out = {median, s.preempted};
    return out;
}

int main(int argc, char **argv) {
    int expect = 0, bad = 0, first = 1;
    if (argc > 1 && strcmp(argv[1], "--expect") == 0) {
        expect = 1;
        first = 2;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: convoy [--expect] PRESET...\n");
        return 2;
    }
    for (int i = first; i < argc; i++) {
        int classic = strcmp(argv[i], "classic") == 0;
        int priority = strncmp(argv[i], "priority", 8) == 0;
        if (expect && !classic && !priority) {
            fprintf(stderr, "convoy: --expect has no expectation for %s (classic, priority...)\n", argv[i]);
            return 2;
        }
        struct outcome o = run(argv[i]);
        if (o.median < 0) {
            bad = 1;
        } else if (expect && classic && (o.preempted != 0 || o.median < 0.5)) {
            fprintf(stderr, "convoy: classic shows no convoy (median %.3f intervals, %d preemptions)\n", o.median,
                    o.preempted);
            bad = 1;
        } else if (expect && priority && o.preempted < ROUNDS / 2) {
            fprintf(stderr, "convoy: %s shows a convoy (%d of %d re-acquires preempted)\n", argv[i], o.preempted,
                    ROUNDS);
            bad = 1;
        }
    }
    return bad;
}
