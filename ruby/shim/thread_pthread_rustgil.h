/*
 * thread_pthread_rustgil.h: Ruby 3.3's GVL routed to the rust-gil library
 * (gil.h). Included by thread_pthread.c when built with -DRUBY_RUST_GIL.
 *
 * Maintained in the rust-gil repository (ruby/shim/); ruby/build.sh puts
 * it into the Ruby tree beside thread_pthread.c.
 *
 * The mapping:
 *   - one gil_t per Ractor scheduler (struct rb_thread_sched): the main
 *     Ractor's is the GVL its threads share; the token is the thread
 *     (rb_thread_t *);
 *   - "having the turn" (stock: sched->running, handed down a FIFO ready
 *     queue) is holding the lock: a thread's way to running
 *     (thread_sched_wait_running_turn) is gil_acquire, its way to waiting
 *     around a blocking call or a sleep a voluntary release, its yield a
 *     forced release and its death a final release. sched->running
 *     names the holder, set and cleared under sched->lock_ as upstream;
 *     the ready queue stays empty;
 *   - "ready" (stock: queued) is a flag of the thread's, set where
 *     upstream queues it (thread creation, once the native thread exists,
 *     as upstream after 3.3.8; a sleeper's wake-up), and a ready thread
 *     then takes the lock itself;
 *   - no timeslice: with the ready queue empty the timer thread never
 *     sets a timer interrupt. A waiter asks the holder to drop after the
 *     switch interval (or at once, under the priority policy, if the
 *     holder is CPU-bound and the waiter not) through the library's
 *     drop-request callback, which sets the holder's timer interrupt as
 *     the timer thread would; the holder answers at its next interrupt
 *     check by yielding (thread.c, rb_threadptr_execute_interrupts), a
 *     thread of Thread#priority p > 0 only every 2^p-th request, as stock
 *     gives it a 2^p times longer timeslice;
 *   - the GVL instrumentation events (READY, RESUMED, SUSPENDED, STARTED,
 *     EXITED) fire where upstream fires them: READY before the acquire,
 *     RESUMED after it, SUSPENDED before a release, EXITED after the final
 *     one;
 *   - M:N threads are not on the lock: thread_pthread.c is built without
 *     them, and RUBY_MN_THREADS=1 stops start-up naming the variable;
 *   - the policy is a library preset with options, from RUBY_RUST_GIL,
 *     parsed by the library for the host "ruby" (gil_config_parse_host):
 *     unset or empty, the library's default for Ruby (priority); a
 *     preset's name stands for Ruby's default for it, which the library
 *     keeps (classic keeps Ruby's 100 ms timeslice, TIME_QUANTUM_USEC;
 *     the priority presets spin 200 us, as on OCaml; ruby/README.md says
 *     why), and options given win over it. The shim sets no value itself.
 *     Reports (the trace's title, stats=1) print the options text the
 *     lock is (gil_get_settings), which builds the same lock on every
 *     host. A bad value ends start-up naming it (exit status 2).
 */

#include <gil.h>
#include "ruby/version.h"
#include "ruby/vm.h"
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

/* The host whose defaults the library applies, and where its options
   come from. */
#define RUSTGIL_HOST "ruby"
#define RUSTGIL_ENV "RUBY_RUST_GIL"

static void
rustgil_check(gil_result_t r, const char *what)
{
    if (r != GIL_OK) rb_bug("rust-gil: %s: %s", what, gil_result_str(r));
}

/* The library's drop-request callback: runs on a waiter, under the lock's
   mutex, while `holder` holds the lock (so the thread and its ec live).
   The same store the timer thread makes in timer_thread_check_timeslice. */
static void
rustgil_drop_request(void *user_data, void *holder)
{
    rb_thread_t *th = (rb_thread_t *)holder;
    (void)user_data;
    RUBY_VM_SET_TIMER_INTERRUPT(th->ec);
}

/* RUBY_RUST_GIL, read once for the process: the configuration and the
   observers it asks for; the value as given, NULL if unset or empty. */
static gil_config_t rustgil_config;
static gil_options_t rustgil_options;
static const char *rustgil_value;
static char rustgil_trace_path[GIL_TRACE_PATH_MAX + 64];
static gil_t *rustgil_traced;
/* The main Ractor's lock, the one the observers watch. */
static gil_t *rustgil_main_gil;

static void
rustgil_read_config(void)
{
    static int read = 0;
    char why[768];
    if (read) return;
    read = 1;
    rustgil_value = getenv(RUSTGIL_ENV);
    if (rustgil_value != NULL && rustgil_value[0] == '\0')
        rustgil_value = NULL;
    if (gil_config_parse_host(RUSTGIL_HOST, rustgil_value, &rustgil_config, &rustgil_options,
                              why, sizeof why) != GIL_OK) {
        /* The library's message names the value, escaped, and the fault. */
        fprintf(stderr, "ruby: %s=%s\n", RUSTGIL_ENV, why);
        exit(2);
    }
}

/* The options text `g` is (gil_get_settings): what reports print. */
static const char *
rustgil_options_text(gil_t *g, gil_settings_t *s)
{
    s->struct_size = sizeof *s;
    rustgil_check(gil_get_settings(g, s), "gil_get_settings");
    return s->options[0] != '\0' ? s->options : "?";
}

/* RUBY_MN_THREADS=1 asks for threads this build does not have: M:N
   threads would switch on shared native threads, outside the lock. */
static void
rustgil_refuse_mn_threads(void)
{
    const char *mn = getenv("RUBY_MN_THREADS");
    if (mn != NULL && atoi(mn) > 0) {
        fprintf(stderr, "ruby: RUBY_MN_THREADS=%s: M:N threads are not supported on the rust-gil GVL"
                " (this ruby is built with RUBY_RUST_GIL); unset RUBY_MN_THREADS\n", mn);
        exit(2);
    }
}

static void
rustgil_write_trace(void)
{
    gil_result_t r = gil_trace_stop(rustgil_traced, NULL);
    if (r != GIL_OK && r != GIL_ERR_NOT_TRACING)
        fprintf(stderr, "ruby: rust-gil: the GIL trace could not be written to '%s': %s\n",
                rustgil_trace_path, gil_result_str(r));
}

/* stats=1: what the lock saw, written to stderr at exit: a row per thread
   (in the order they began; times in ms), the lock's counters and the
   quantiles of its waits and holds. Only the process that started: a fork
   child inherits the handler, not the report. */
static gil_t *rustgil_counted;
static pid_t rustgil_counted_pid;

static int32_t
rustgil_report_thread(void *user_data, const gil_thread_stats_t *s)
{
    unsigned *row = user_data;
    fprintf(stderr, "%7u %5u %12llu %8llu %10.1f %10.1f %10.1f %7llu %7llu %9llu\n",
            ++*row, s->alive, (unsigned long long)s->acquisitions,
            (unsigned long long)s->waits, s->wait_ns / 1e6, s->hold_ns / 1e6,
            s->call_ns / 1e6, (unsigned long long)s->forced_releases,
            (unsigned long long)s->drop_requests_raised,
            (unsigned long long)s->drop_requests_received);
    return 0;
}

/* The top of the fine bucket (gil.h) holding quantile q, in microseconds. */
static double
rustgil_quantile_us(const uint64_t *fine, double q)
{
    uint64_t total = 0, seen = 0;
    for (int i = 0; i < GIL_HISTOGRAM_FINE_BUCKETS; i++) total += fine[i];
    if (total == 0) return 0;
    for (int i = 0; i < GIL_HISTOGRAM_FINE_BUCKETS; i++) {
        seen += fine[i];
        if (seen >= q * total) {
            if (i < 8) return (i + 1) / 1e3;
            int p = 3 + (i - 8) / 8, k = (i - 8) % 8;
            return (double)(9 + k) * (double)(1ULL << (p - 3)) / 1e3;
        }
    }
    return 0;
}

static void
rustgil_report(void)
{
    gil_t *g = rustgil_counted;
    gil_counters_t c = { .struct_size = sizeof c };
    gil_settings_t s;
    gil_histograms_t *h;
    unsigned row = 0;
    const char *options;
    if (getpid() != rustgil_counted_pid || (h = calloc(1, sizeof *h)) == NULL) return;
    h->struct_size = sizeof *h;
    options = rustgil_options_text(g, &s);
    fprintf(stderr, "ruby: rust-gil stats, pid %ld, %s=%s, GIL options %s, switch interval %llu us\n"
            " thread alive acquisitions    waits    wait ms    hold ms    call ms  forced  raised  received\n",
            (long)getpid(), RUSTGIL_ENV, rustgil_value != NULL ? rustgil_value : "(unset)", options,
            (unsigned long long)s.switch_interval_us);
    (void)gil_foreach_thread_stats(g, rustgil_report_thread, &row);
    if (gil_get_counters(g, &c) == GIL_OK)
        fprintf(stderr, " lock: %llu acquisitions, %llu switches, %llu drop requests, "
                "%llu forced switches, %llu preemptions, %llu starvation promotions; "
                "spin %llu us, %llu CPU spin takes\n",
                (unsigned long long)c.acquisitions, (unsigned long long)c.switches,
                (unsigned long long)c.drop_requests, (unsigned long long)c.forced_switches,
                (unsigned long long)c.preemptions, (unsigned long long)c.starvation_promotions,
                (unsigned long long)s.spin_us, (unsigned long long)c.cpu_spin_takes);
    if (gil_get_histograms(g, h) == GIL_OK)
        fprintf(stderr, " waits (us): p50 %.1f, p99 %.1f, p99.9 %.1f, max %.1f;"
                " holds (us): p50 %.1f, p99 %.1f, max %.1f\n",
                rustgil_quantile_us(h->wait_fine, 0.5), rustgil_quantile_us(h->wait_fine, 0.99),
                rustgil_quantile_us(h->wait_fine, 0.999), rustgil_quantile_us(h->wait_fine, 1.0),
                rustgil_quantile_us(h->hold_fine, 0.5), rustgil_quantile_us(h->hold_fine, 0.99),
                rustgil_quantile_us(h->hold_fine, 1.0));
    free(h);
}

/* The report and the trace, written once, at the first of: the VM's
   destruction (ruby_vm_at_exit), which every end that runs Ruby's cleanup
   reaches: the end of the program, exit, an uncaught exception, and
   SIGINT, SIGTERM or an uncaught Interrupt or SignalException, after which
   Ruby raises the signal again, so exit(3) never runs; or exit(3), for a
   C extension that exits without Ruby's cleanup. Not on exit! or a signal
   Ruby does not handle (SIGKILL). A fork child inherits both
   registrations and writes its own trace (%p), not the report. */
static void
rustgil_write_observers(void)
{
    static int written = 0;
    if (written) return;
    written = 1;
    if (rustgil_counted != NULL) rustgil_report();
    if (rustgil_traced != NULL) rustgil_write_trace();
}

static void
rustgil_vm_at_exit(ruby_vm_t *vm)
{
    (void)vm;
    rustgil_write_observers();
}

/* The observers RUBY_RUST_GIL asks for (stats=, trace=), on the main
   Ractor's lock; in a fork child a trace starts only if its name has %p. */
static void
rustgil_start_observers(gil_t *g, int child)
{
    static int registered = 0;
    char title[GIL_OPTIONS_TEXT_MAX + 128], why[GIL_TRACE_PATH_MAX + 256];
    gil_settings_t s;
    snprintf(title, sizeof title, "Ruby %s, GIL options %s, pid %ld",
             ruby_version, rustgil_options_text(g, &s), (long)getpid());
    if (gil_options_start(g, &rustgil_options, title,
                          child ? GIL_OPTIONS_FORK_CHILD : 0,
                          rustgil_trace_path, sizeof rustgil_trace_path,
                          why, sizeof why) != GIL_OK) {
        /* Only a value asks for observers: the default starts none. */
        fprintf(stderr, "ruby: %s='%s': %s\n", RUSTGIL_ENV, rustgil_value != NULL ? rustgil_value : "", why);
        if (!child) exit(2);
        return;
    }
    if (rustgil_options.stats && !child) {
        rustgil_check(gil_set_histograms(g, true), "gil_set_histograms");
        rustgil_counted = g;
        rustgil_counted_pid = getpid();
    }
    if (rustgil_trace_path[0] != '\0') rustgil_traced = g;
    if ((rustgil_counted != NULL || rustgil_traced != NULL) && !registered) {
        /* At start-up (Init_BareVM) the VM and its allocator exist. */
        registered = 1;
        ruby_vm_at_exit(rustgil_vm_at_exit);
        atexit(rustgil_write_observers);
    }
}

/* A new Ractor's lock (rb_thread_sched_init); the main Ractor's is made
   earlier, by its first thread (rustgil_main_thread), and kept. */
static void
rustgil_sched_init(struct rb_thread_sched *sched)
{
    gil_config_t config;
    if (sched->gil != NULL) return;
    rustgil_read_config();
    config = rustgil_config;
    config.on_drop_request = rustgil_drop_request;
    config.user_data = sched;
    rustgil_check(gil_new(&config, &sched->gil), "gil_new");
    RUBY_ATOMIC_SET(sched->gil_waiters, 0);
}

/* The main thread takes the main Ractor's lock at start-up, where
   upstream makes it sched->running (Init_native_thread). */
static void
rustgil_main_thread(struct rb_thread_sched *sched, rb_thread_t *th)
{
    rustgil_refuse_mn_threads();
    rustgil_sched_init(sched);
    rustgil_check(gil_acquire(sched->gil, th), "gil_acquire");
    rustgil_main_gil = sched->gil;
    rustgil_start_observers(sched->gil, 0);
}

/* In a fork child: the lock fresh and held by the forking thread, no
   waiters (their threads are the parent's). */
static void
rustgil_atfork(struct rb_thread_sched *sched, rb_thread_t *th)
{
    rustgil_check(gil_reinit_after_fork(sched->gil, th), "gil_reinit_after_fork");
    RUBY_ATOMIC_SET(sched->gil_waiters, 0);
    th->sched.gil_ready = false;
    if (sched->gil == rustgil_main_gil) rustgil_start_observers(sched->gil, 1);
}

/* Whether a thread is ready (stock: the ready queue is not empty): made
   ready and not yet holding the lock, whether it waits in gil_acquire
   already or is still on its way (a thread just created, a sleeper just
   woken). A yield hands over only then. */
static bool
rustgil_has_waiters(struct rb_thread_sched *sched)
{
    return RUBY_ATOMIC_LOAD(sched->gil_waiters) > 0;
}

/* Whether the holder answers its timer interrupt by yielding now: only
   if a drop request still stands (the interrupt may be stale, raised for
   an earlier holder), and, as stock scales its timeslice by
   Thread#priority (100 ms << p), a thread of priority p > 0 answers only
   the 2^p-th request of its turn: rb_threadptr_execute_interrupts counts
   10 ms of running time per timer interrupt, and a switch resets it
   (rb_ractor_thread_switch). Priority 0 or below answers the first. */
static bool
rustgil_answers_drop_request(rb_thread_t *th)
{
    uint32_t turn_us = th->priority > 0 ? (uint32_t)10000 << th->priority : 0;
    return gil_drop_requested(TH_SCHED(th)->gil) && th->running_time_us >= turn_us;
}

/* waiting -> ready: where upstream queues `th` (its creation by another
   thread, once its native thread exists; a sleeper's wake-up; a yield),
   it is marked ready, and a sleeper woken; it then takes the lock
   itself. sched->lock_ held. */
static void
rustgil_to_ready(struct rb_thread_sched *sched, rb_thread_t *th, bool wakeup)
{
    ASSERT_thread_sched_locked(sched, NULL);
    if (!th->sched.gil_ready) RUBY_ATOMIC_INC(sched->gil_waiters);
    th->sched.gil_ready = true;
    if (wakeup && th->nt != NULL) rb_native_cond_signal(&th->nt->cond.readyq);
}

/* ready -> running: waits to be ready (a sleeper), then for the lock.
   sched->lock_ held on entry and on return, not while waiting for the
   lock (the holder takes it to let go). */
static void
rustgil_wait_turn(struct rb_thread_sched *sched, rb_thread_t *th)
{
    bool took = false;
    ASSERT_thread_sched_locked(sched, th);
    while (!th->sched.gil_ready) {
        thread_sched_set_lock_owner(sched, NULL);
        rb_native_cond_wait(&th->nt->cond.readyq, &sched->lock_);
        thread_sched_set_lock_owner(sched, th);
    }
    th->sched.gil_ready = false;
    thread_sched_unlock(sched, th);
    rustgil_check(gil_try_acquire(sched->gil, th, &took), "gil_try_acquire");
    if (!took) rustgil_check(gil_acquire(sched->gil, th), "gil_acquire");
    RUBY_ATOMIC_DEC(sched->gil_waiters);
    thread_sched_lock(sched, th);
    thread_sched_set_running(sched, th);
    thread_sched_add_running_thread(sched, th);
}

/* running -> waiting (voluntary: a blocking call, a sleep), -> ready
   (forced: a yield) or -> dead (final). sched->lock_ held throughout, as
   stock hands the turn over under it: the next holder takes the lock,
   then waits for sched->lock_ (rustgil_wait_turn) until the releaser's
   caller is done, so that its events (EXITED after the final release)
   come before the next holder runs, as on stock. A forced release waits
   only for the next holder to take the lock, not for sched->lock_. */
static void
rustgil_release(struct rb_thread_sched *sched, rb_thread_t *th, gil_release_reason_t why)
{
    ASSERT_thread_sched_locked(sched, th);
    VM_ASSERT(sched->running == th);
    thread_sched_set_running(sched, NULL);
    thread_sched_del_running_thread(sched, th);
    rustgil_check(gil_release(sched->gil, th, why), "gil_release");
}

/* How long a yielder lets a ready thread that is not in the lock's line
   yet (a forced release does not wait for it) come and take the lock
   before it queues again itself: long enough for a thread just created
   or woken to be scheduled, short enough that one the OS is slow to run
   costs little. Every ready thread has its native thread: a new one is
   made ready only once it has started (native_thread_create_dedicated),
   so one whose start failed is never waited for. */
#define RUSTGIL_YIELD_GRACE_NS 2000000

/* A yield's release: forced, so it returns once a thread in the lock's
   line has the lock; if the ready thread was still on its way, the
   yielder steps aside (sched_yield) until it takes the lock, within the
   grace above, so that Thread.pass lets it run as stock's queue does.
   sched->lock_ held on entry and on return. */
static void
rustgil_yield_release(struct rb_thread_sched *sched, rb_thread_t *th)
{
    void *last = NULL;
    uint64_t until;
    rustgil_release(sched, th, GIL_RELEASE_FORCED);
    thread_sched_unlock(sched, th);
    until = gil_now_ns() + RUSTGIL_YIELD_GRACE_NS;
    while (rustgil_has_waiters(sched)
           && gil_get_last_holder(sched->gil, &last) == GIL_OK && last == (void *)th
           && gil_now_ns() < until)
        sched_yield();
    thread_sched_lock(sched, th);
}
