/*
 * C tests of the gil C ABI. Built -Wall -Wextra -Werror -pedantic, run
 * under ASan + UBSan and under valgrind by scripts/c-tests.sh.
 *
 * With mingw-w64 for Windows (winpthreads; run under Wine by
 * scripts/platforms.sh) the tests of fork and pthread_cancel, which Windows
 * does not have, and two that rely on POSIX file semantics are left out;
 * gil_reinit_after_fork must say GIL_ERR_UNSUPPORTED there.
 *
 * GIL_TEST_SCALE (default 1) multiplies the iteration counts; valgrind runs
 * use a smaller one because it serialises threads.
 */
#define _GNU_SOURCE
#include <gil.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/wait.h>
#endif
#include <time.h>
#include <unistd.h>

static int failures;
static int checks_failed_in_test;

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "  FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
            checks_failed_in_test++;                                               \
        }                                                                          \
    } while (0)

#define CHECK_RESULT(expr, want)                                                   \
    do {                                                                           \
        gil_result_t got_ = (expr);                                                \
        if (got_ != (want)) {                                                      \
            fprintf(stderr, "  FAILED %s:%d: %s gave %u (%s), want %s\n", __FILE__, \
                    __LINE__, #expr, (unsigned)got_, gil_result_str(got_), #want); \
            checks_failed_in_test++;                                               \
        }                                                                          \
    } while (0)

#ifdef _WIN32
#include <direct.h>
#include <windows.h>
/* POSIX's mkdtemp: a fresh directory from a template ending in XXXXXX. */
static char *mkdtemp(char *template_) {
    if (_mktemp_s(template_, strlen(template_) + 1) != 0) return NULL;
    return _mkdir(template_) == 0 ? template_ : NULL;
}
#endif

static int scale(void) {
    const char *s = getenv("GIL_TEST_SCALE");
    int v = s ? atoi(s) : 1;
    return v > 0 ? v : 1;
}

/* ---- watchdog ------------------------------------------------------------
 * A test that runs past GIL_TEST_WATCHDOG_S seconds (default 300) is
 * reported by name, with the counters of the last lock new_gil made (read
 * twice, a second apart: moving counters are a livelock, still ones a
 * deadlock), and the run aborts. Without it a hang is only the outer
 * `timeout` killing the whole run with no word on where. */
static pthread_mutex_t watch_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond = PTHREAD_COND_INITIALIZER;
static const char *watch_test;   /* the test running, NULL between tests */
static unsigned long watch_round; /* counts tests started */
static gil_t *watched_gil;        /* the last lock new_gil made, until freed */

static void watch_report_counters(void) {
    if (watched_gil == NULL) {
        fprintf(stderr, "  (no lock made by new_gil is alive)\n");
        return;
    }
    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    if (gil_get_counters(watched_gil, &c) != GIL_OK) return;
    fprintf(stderr,
            "  counters: acquisitions %llu, switches %llu, drop requests %llu, forced switches %llu, "
            "preemptions %llu, starvation promotions %llu\n",
            (unsigned long long)c.acquisitions, (unsigned long long)c.switches,
            (unsigned long long)c.drop_requests, (unsigned long long)c.forced_switches,
            (unsigned long long)c.preemptions, (unsigned long long)c.starvation_promotions);
}

static void *watchdog(void *arg) {
    int limit = *(int *)arg;
    pthread_mutex_lock(&watch_mutex);
    for (;;) {
        while (watch_test == NULL) pthread_cond_wait(&watch_cond, &watch_mutex);
        unsigned long round = watch_round;
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += limit;
        int rc = 0;
        while (watch_round == round && watch_test != NULL && rc == 0)
            rc = pthread_cond_timedwait(&watch_cond, &watch_mutex, &deadline);
        if (watch_round != round || watch_test == NULL) continue;
        fprintf(stderr, "test %s has run for %d s: stuck\n", watch_test, limit);
        watch_report_counters();
        pthread_mutex_unlock(&watch_mutex);
        sleep(1);
        pthread_mutex_lock(&watch_mutex);
        watch_report_counters();
        fflush(stderr);
        abort();
    }
    return NULL;
}

#ifndef _WIN32
/* Forks keep the watchdog's mutex usable in the child. */
static void watch_lock(void) { pthread_mutex_lock(&watch_mutex); }
static void watch_unlock(void) { pthread_mutex_unlock(&watch_mutex); }
#endif

static void start_watchdog(void) {
    static int limit;
    const char *s = getenv("GIL_TEST_WATCHDOG_S");
    limit = s ? atoi(s) : 300;
    if (limit <= 0) return;
#ifndef _WIN32
    pthread_atfork(watch_lock, watch_unlock, watch_unlock);
#endif
    pthread_t th;
    if (pthread_create(&th, NULL, watchdog, &limit) != 0) abort();
    pthread_detach(th);
}

static void watch(const char *test) {
    pthread_mutex_lock(&watch_mutex);
    watch_test = test;
    watch_round += test != NULL;
    pthread_cond_signal(&watch_cond);
    pthread_mutex_unlock(&watch_mutex);
}

static gil_t *new_gil(uint64_t interval_us, gil_drop_request_cb cb, void *user_data) {
    gil_config_t config;
    gil_t *gil = NULL;
    if (gil_config_init(&config) != GIL_OK) abort();
    config.switch_interval_us = interval_us;
    config.on_drop_request = cb;
    config.user_data = user_data;
    if (gil_new(&config, &gil) != GIL_OK) abort();
    pthread_mutex_lock(&watch_mutex);
    watched_gil = gil;
    pthread_mutex_unlock(&watch_mutex);
    return gil;
}

/* gil_free, first forgetting the lock if the watchdog may read it. */
static gil_result_t free_gil(gil_t *gil) {
    pthread_mutex_lock(&watch_mutex);
    if (gil != NULL && gil == watched_gil) watched_gil = NULL;
    pthread_mutex_unlock(&watch_mutex);
    return gil_free(gil);
}
#define gil_free free_gil

/* ---- mutual exclusion -------------------------------------------------- */

enum { EXCL_THREADS = 8 };

struct excl {
    gil_t *gil;
    unsigned long counter; /* protected only by the GIL */
    int rounds;
};

struct excl_thread {
    struct excl *shared;
    int index;
};

static void *excl_worker(void *arg) {
    struct excl_thread *self = arg;
    struct excl *s = self->shared;
    for (int i = 0; i < s->rounds; i++) {
        if (gil_acquire(s->gil, self) != GIL_OK) abort();
        volatile unsigned long *c = &s->counter;
        unsigned long v = *c;
        if (i % 16 == 0) sched_yield();
        *c = v + 1;
        gil_release_reason_t reason = gil_drop_requested(s->gil) ? GIL_RELEASE_FORCED : GIL_RELEASE_VOLUNTARY;
        if (gil_release(s->gil, self, reason) != GIL_OK) abort();
    }
    return NULL;
}

static void test_mutual_exclusion(void) {
    struct excl s = {new_gil(50, NULL, NULL), 0, 5000 * scale()};
    struct excl_thread t[EXCL_THREADS];
    pthread_t th[EXCL_THREADS];
    for (int i = 0; i < EXCL_THREADS; i++) {
        t[i].shared = &s;
        t[i].index = i;
        pthread_create(&th[i], NULL, excl_worker, &t[i]);
    }
    for (int i = 0; i < EXCL_THREADS; i++) pthread_join(th[i], NULL);
    CHECK(s.counter == (unsigned long)EXCL_THREADS * (unsigned long)s.rounds);
    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK_RESULT(gil_get_counters(s.gil, &c), GIL_OK);
    CHECK(c.acquisitions == (uint64_t)EXCL_THREADS * (uint64_t)s.rounds);
    CHECK_RESULT(gil_free(s.gil), GIL_OK);
}

/* ---- drop requests: callback, flag, forced switch ---------------------- */

/* A host thread with an "eval breaker", as CPython's PyThreadState. */
struct host_thread {
    atomic_int eval_breaker;
    atomic_int holding; /* 1 from acquire's return until release is called */
};

struct cb_log {
    atomic_int calls;
    atomic_int bad_holder; /* callback named a thread that was not holding */
    void *last_holder;
};

static void on_drop_request(void *user_data, void *holder) {
    struct cb_log *log = user_data;
    struct host_thread *t = holder;
    if (!atomic_load(&t->holding)) atomic_fetch_add(&log->bad_holder, 1);
    log->last_holder = holder;
    atomic_store(&t->eval_breaker, 1);
    atomic_fetch_add(&log->calls, 1);
}

struct waiter_arg {
    gil_t *gil;
    struct host_thread *self;
    atomic_int done;
};

static void *waiter_main(void *arg) {
    struct waiter_arg *w = arg;
    if (gil_acquire(w->gil, w->self) != GIL_OK) abort();
    atomic_store(&w->self->holding, 1);
    atomic_store(&w->done, 1);
    atomic_store(&w->self->holding, 0);
    if (gil_release(w->gil, w->self, GIL_RELEASE_FINAL) != GIL_OK) abort();
    return NULL;
}

static void test_drop_request_through_callback(void) {
    struct cb_log log;
    memset(&log, 0, sizeof log);
    gil_t *gil = new_gil(1000, on_drop_request, &log);
    struct host_thread holder, waiter;
    memset(&holder, 0, sizeof holder);
    memset(&waiter, 0, sizeof waiter);
    CHECK_RESULT(gil_acquire(gil, &holder), GIL_OK);
    atomic_store(&holder.holding, 1);
    struct waiter_arg w = {gil, &waiter, 0};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &w);
    /* The holder checks only its own eval breaker, as CPython does. */
    while (!atomic_load(&holder.eval_breaker)) sched_yield();
    CHECK(log.last_holder == &holder);
    /* Holding until the release returns: a waiter may ask again while it
       runs (one request an interval), and the holder answers the mutex. */
    CHECK_RESULT(gil_release(gil, &holder, GIL_RELEASE_FORCED), GIL_OK);
    atomic_store(&holder.holding, 0);
    /* Forced switch: returned only once the waiter had taken the lock. */
    void *last = NULL;
    CHECK_RESULT(gil_get_last_holder(gil, &last), GIL_OK);
    CHECK(last == &waiter || atomic_load(&w.done));
    pthread_join(th, NULL);
    CHECK(atomic_load(&log.calls) >= 1);
    CHECK(atomic_load(&log.bad_holder) == 0);
    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK_RESULT(gil_get_counters(gil, &c), GIL_OK);
    CHECK(c.drop_requests >= 1);
    CHECK(c.forced_switches == 1);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

static void test_drop_request_through_flag(void) {
    gil_t *gil = new_gil(1000, NULL, NULL);
    struct host_thread holder, waiter;
    memset(&holder, 0, sizeof holder);
    memset(&waiter, 0, sizeof waiter);
    CHECK_RESULT(gil_acquire(gil, &holder), GIL_OK);
    bool yielded = true;
    CHECK_RESULT(gil_handle_drop_request(gil, &holder, &yielded), GIL_OK);
    CHECK(!yielded); /* nobody waits: nothing to do */
    struct waiter_arg w = {gil, &waiter, 0};
    pthread_t th;
    pthread_create(&th, NULL, waiter_main, &w);
    while (!gil_drop_requested(gil)) sched_yield();
    CHECK_RESULT(gil_handle_drop_request(gil, &holder, &yielded), GIL_OK);
    CHECK(yielded);
    /* handle_drop_request released (forced) and re-acquired: by then the
       waiter has had its turn. */
    CHECK(atomic_load(&w.done));
    void *h = NULL;
    CHECK_RESULT(gil_get_holder(gil, &h), GIL_OK);
    CHECK(h == &holder);
    CHECK_RESULT(gil_release(gil, &holder, GIL_RELEASE_FINAL), GIL_OK);
    pthread_join(th, NULL);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

static void test_forced_switch(void) {
    gil_t *gil = new_gil(500, NULL, NULL);
    struct host_thread a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int rounds = 10 * scale();
    for (int i = 0; i < rounds; i++) {
        CHECK_RESULT(gil_acquire(gil, &a), GIL_OK);
        struct waiter_arg w = {gil, &b, 0};
        pthread_t th;
        pthread_create(&th, NULL, waiter_main, &w);
        while (!gil_drop_requested(gil)) sched_yield(); /* b waits */
        CHECK_RESULT(gil_release(gil, &a, GIL_RELEASE_FORCED), GIL_OK);
        /* b took the lock before our release returned (and may even have
           made its final release since, which clears last_holder). */
        void *last = &a;
        CHECK_RESULT(gil_get_last_holder(gil, &last), GIL_OK);
        CHECK(last == &b || (last == NULL && atomic_load(&w.done)));
        pthread_join(th, NULL);
    }
    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK_RESULT(gil_get_counters(gil, &c), GIL_OK);
    CHECK(c.forced_switches == (uint64_t)rounds);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

/* ---- misuse ------------------------------------------------------------- */

static bool abort_now(void *user_data) {
    atomic_fetch_add((atomic_int *)user_data, 1);
    return true;
}

static void *busy_waiter(void *arg) {
    struct waiter_arg *w = arg;
    if (gil_acquire(w->gil, w->self) != GIL_OK) abort();
    atomic_store(&w->done, 1);
    if (gil_release(w->gil, w->self, GIL_RELEASE_FINAL) != GIL_OK) abort();
    return NULL;
}

static void test_misuse_codes(void) {
    int a_, b_;
    void *a = &a_, *b = &b_;
    gil_t *gil = NULL;
    gil_config_t config;

    /* NULL arguments */
    CHECK_RESULT(gil_config_init(NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_new(NULL, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_new(NULL, &gil), GIL_OK); /* NULL config: defaults */
    CHECK_RESULT(gil_acquire(NULL, a), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_acquire(gil, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_release(gil, NULL, GIL_RELEASE_VOLUNTARY), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_try_acquire(gil, a, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_get_switch_interval(gil, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_get_holder(NULL, &b), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_get_counters(gil, NULL), GIL_ERR_NULL_ARGUMENT);
#ifdef _WIN32
    CHECK_RESULT(gil_reinit_after_fork(gil, &b), GIL_ERR_UNSUPPORTED);
#else
    CHECK_RESULT(gil_reinit_after_fork(gil, NULL), GIL_ERR_NULL_ARGUMENT);
#endif
    CHECK_RESULT(gil_policy_from_name(NULL, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK(!gil_drop_requested(NULL));
    CHECK_RESULT(gil_free(NULL), GIL_OK);
    {
        bool locked = true;
        CHECK_RESULT(gil_is_locked(gil, &locked), GIL_OK);
        CHECK(!locked);
    }

    /* not the holder / already held; out-parameters untouched on error */
    CHECK_RESULT(gil_release(gil, a, GIL_RELEASE_VOLUNTARY), GIL_ERR_NOT_HOLDER);
    CHECK_RESULT(gil_acquire(gil, a), GIL_OK);
    CHECK_RESULT(gil_acquire(gil, a), GIL_ERR_ALREADY_HELD);
    {
        bool got = true;
        CHECK_RESULT(gil_try_acquire(gil, a, &got), GIL_ERR_ALREADY_HELD);
        CHECK(got == true); /* untouched */
        CHECK_RESULT(gil_try_acquire(gil, b, &got), GIL_OK);
        CHECK(got == false);
        bool yielded = true;
        CHECK_RESULT(gil_handle_drop_request(gil, b, &yielded), GIL_ERR_NOT_HOLDER);
        CHECK(yielded == true); /* untouched */
    }
    CHECK_RESULT(gil_release(gil, b, GIL_RELEASE_FORCED), GIL_ERR_NOT_HOLDER);
    CHECK_RESULT(gil_release(gil, a, 7), GIL_ERR_INVALID_ARGUMENT);
    {
        void *h = NULL;
        CHECK_RESULT(gil_get_holder(gil, &h), GIL_OK);
        CHECK(h == a); /* a bad release changed nothing */
    }

    /* busy: free while held, and while awaited */
    CHECK_RESULT(gil_free(gil), GIL_ERR_BUSY);
    {
        int c_;
        struct waiter_arg w = {gil, (struct host_thread *)(void *)&c_, 0};
        pthread_t th;
        pthread_create(&th, NULL, busy_waiter, &w);
        while (!gil_drop_requested(gil)) sched_yield();
        CHECK_RESULT(gil_release(gil, a, GIL_RELEASE_VOLUNTARY), GIL_OK);
        /* The release answered the pending request, so it returned only
           once the waiter had the lock: held, or just being released. */
        pthread_join(th, NULL);
        CHECK(atomic_load(&w.done));
    }
    CHECK_RESULT(gil_acquire(gil, a), GIL_OK);
    {
        /* Held, and a waiter inside gil_acquire: free must refuse. */
        int c_;
        struct waiter_arg w = {gil, (struct host_thread *)(void *)&c_, 0};
        pthread_t th;
        pthread_create(&th, NULL, busy_waiter, &w);
        while (!gil_drop_requested(gil)) sched_yield();
        CHECK_RESULT(gil_free(gil), GIL_ERR_BUSY);
        CHECK_RESULT(gil_release(gil, a, GIL_RELEASE_FINAL), GIL_OK);
        pthread_join(th, NULL);
        CHECK(atomic_load(&w.done));
    }

    /* switch interval bounds */
    {
        uint64_t us = 0;
        CHECK_RESULT(gil_set_switch_interval(gil, GIL_MAX_SWITCH_INTERVAL_US + 1), GIL_ERR_INVALID_CONFIG);
        CHECK_RESULT(gil_get_switch_interval(gil, &us), GIL_OK);
        CHECK(us == GIL_DEFAULT_SWITCH_INTERVAL_US);
        CHECK_RESULT(gil_set_switch_interval(gil, 0), GIL_OK);
        CHECK_RESULT(gil_get_switch_interval(gil, &us), GIL_OK);
        CHECK(us == 0);
    }

    /* aborted wait */
    {
        atomic_int asked = 0;
        CHECK_RESULT(gil_set_switch_interval(gil, 200), GIL_OK);
        CHECK_RESULT(gil_acquire(gil, a), GIL_OK);
        /* From this thread with another token: the wait times out, asks,
           and gives up. */
        CHECK_RESULT(gil_acquire_or_abort(gil, b, abort_now, &asked), GIL_ERR_ABORTED);
        CHECK(atomic_load(&asked) >= 1);
        void *h = NULL;
        CHECK_RESULT(gil_get_holder(gil, &h), GIL_OK);
        CHECK(h == a);
        CHECK_RESULT(gil_release(gil, a, GIL_RELEASE_FORCED), GIL_OK); /* nobody waits: returns */
        CHECK_RESULT(gil_acquire_or_abort(gil, b, NULL, NULL), GIL_OK);
        CHECK_RESULT(gil_release(gil, b, GIL_RELEASE_FINAL), GIL_OK);
    }
    CHECK_RESULT(gil_free(gil), GIL_OK);

    /* invalid configs */
    gil = NULL;
    CHECK_RESULT(gil_config_init(&config), GIL_OK);
    CHECK(config.struct_size == sizeof config);
    config.struct_size = 0;
    CHECK_RESULT(gil_new(&config, &gil), GIL_ERR_INVALID_CONFIG);
    config.struct_size = sizeof config + 8;
    CHECK_RESULT(gil_new(&config, &gil), GIL_ERR_INVALID_CONFIG);
    CHECK_RESULT(gil_config_init(&config), GIL_OK);
    config.policy = 99;
    CHECK_RESULT(gil_new(&config, &gil), GIL_ERR_INVALID_CONFIG);
    CHECK_RESULT(gil_config_init(&config), GIL_OK);
    config.switch_interval_us = GIL_MAX_SWITCH_INTERVAL_US + 1;
    CHECK_RESULT(gil_new(&config, &gil), GIL_ERR_INVALID_CONFIG);
    CHECK(gil == NULL); /* out-parameter untouched on every failure */

    /* an older, shorter config: missing fields take their defaults */
    CHECK_RESULT(gil_config_init(&config), GIL_OK);
    config.struct_size = (uint32_t)offsetof(gil_config_t, switch_interval_us);
    config.switch_interval_us = 1; /* beyond struct_size: must be ignored */
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    {
        uint64_t us = 0;
        CHECK_RESULT(gil_get_switch_interval(gil, &us), GIL_OK);
        CHECK(us == GIL_DEFAULT_SWITCH_INTERVAL_US);
        gil_counters_t c;
        memset(&c, 0xAB, sizeof c);
        c.struct_size = 0;
        CHECK_RESULT(gil_get_counters(gil, &c), GIL_ERR_INVALID_ARGUMENT);
        c.struct_size = (uint32_t)offsetof(gil_counters_t, switches); /* old, shorter */
        CHECK_RESULT(gil_get_counters(gil, &c), GIL_OK);
        CHECK(c.acquisitions == 0);
        CHECK(c.switches == 0xABABABABABABABABull); /* beyond struct_size: untouched */
    }
    CHECK_RESULT(gil_free(gil), GIL_OK);

    /* policies and result texts */
    {
        gil_policy_t p = 42;
        CHECK_RESULT(gil_policy_from_name("classic", &p), GIL_OK);
        CHECK(p == GIL_POLICY_CLASSIC);
        p = 42;
        CHECK_RESULT(gil_policy_from_name("fifo-please", &p), GIL_ERR_UNKNOWN_POLICY);
        CHECK(p == 42);
        CHECK(strcmp(gil_policy_name(GIL_POLICY_CLASSIC), "classic") == 0);
        CHECK(gil_policy_name(77) == NULL);
        for (uint32_t code = 0; code <= GIL_ERR_IO; code++) {
            CHECK(gil_result_str(code) != NULL);
            CHECK(strcmp(gil_result_str(code), gil_result_str(1000)) != 0);
        }
        CHECK(strcmp(gil_version(), GIL_VERSION) == 0);
    }
}

/* ---- presets and policies ------------------------------------------------ */

static void test_presets_and_policies(void) {
    gil_config_t config;
    gil_t *gil = NULL;
    size_t n = 0;
    while (gil_preset_name(n) != NULL) n++;
    CHECK(n == 7);
    CHECK(strcmp(gil_preset_name(0), "classic") == 0);
    CHECK(strcmp(gil_preset_name(6), "priority-lazy-monitor") == 0);

    memset(&config, 0x5A, sizeof config);
    CHECK_RESULT(gil_config_preset("no-such-preset", &config), GIL_ERR_UNKNOWN_PRESET);
    CHECK(config.struct_size == 0x5A5A5A5Au); /* untouched */
    CHECK_RESULT(gil_config_preset(NULL, &config), GIL_ERR_NULL_ARGUMENT);

    CHECK_RESULT(gil_config_preset("priority-lazy", &config), GIL_OK);
    CHECK(config.struct_size == sizeof config);
    CHECK(config.policy == GIL_POLICY_PRIORITY);
    CHECK(config.lazy_release_us > 0);
    CHECK(config.on_drop_request == NULL);
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    gil_policy_t p = 99;
    uint64_t lazy = 0;
    CHECK_RESULT(gil_get_policy(gil, &p), GIL_OK);
    CHECK(p == GIL_POLICY_PRIORITY);
    CHECK_RESULT(gil_get_lazy_release(gil, &lazy), GIL_OK);
    CHECK(lazy == config.lazy_release_us);
    CHECK(strcmp(gil_policy_name(GIL_POLICY_PRIORITY), "priority") == 0);
    /* The lock names its preset, whatever interval is set on top. */
    const char *preset = NULL;
    CHECK_RESULT(gil_set_switch_interval(gil, 123), GIL_OK);
    CHECK_RESULT(gil_get_preset(gil, &preset), GIL_OK);
    CHECK(preset != NULL && strcmp(preset, "priority-lazy") == 0);
    CHECK_RESULT(gil_get_preset(gil, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_get_preset(NULL, &preset), GIL_ERR_NULL_ARGUMENT);
    {
        /* Classic with lazy release and the monitor: no preset's name. */
        gil_config_t odd;
        gil_t *other = NULL;
        CHECK_RESULT(gil_config_preset("monitor", &odd), GIL_OK);
        odd.lazy_release_us = 50;
        CHECK_RESULT(gil_new(&odd, &other), GIL_OK);
        preset = "unchanged";
        CHECK_RESULT(gil_get_preset(other, &preset), GIL_OK);
        CHECK(preset == NULL);
        CHECK_RESULT(gil_free(other), GIL_OK);
    }

    /* A lazy voluntary release leaves the lock reserved, not held, and
       taking it back is a reclaim: no switch. */
    int me;
    bool locked = true, reserved = false;
    void *holder = &me;
    CHECK_RESULT(gil_acquire(gil, &me), GIL_OK);
    CHECK_RESULT(gil_is_reserved(gil, &reserved), GIL_OK);
    CHECK(!reserved);
    CHECK_RESULT(gil_release(gil, &me, GIL_RELEASE_VOLUNTARY), GIL_OK);
    CHECK_RESULT(gil_is_locked(gil, &locked), GIL_OK);
    CHECK(!locked);
    CHECK_RESULT(gil_is_reserved(gil, &reserved), GIL_OK);
    CHECK(reserved);
    CHECK_RESULT(gil_is_reserved(gil, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_is_reserved(NULL, &reserved), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_get_holder(gil, &holder), GIL_OK);
    CHECK(holder == NULL);
    CHECK_RESULT(gil_release(gil, &me, GIL_RELEASE_VOLUNTARY), GIL_ERR_NOT_HOLDER);
    CHECK_RESULT(gil_acquire(gil, &me), GIL_OK);
    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK_RESULT(gil_get_counters(gil, &c), GIL_OK);
    CHECK(c.lazy_releases == 1 && c.acquisitions == 2 && c.switches == 1 && c.lazy_takeovers == 0);
    CHECK_RESULT(gil_free(gil), GIL_ERR_BUSY); /* held */
    /* Released lazily and never taken back: nobody holds it, so it can be
       freed (the reservation ends). */
    CHECK_RESULT(gil_release(gil, &me, GIL_RELEASE_VOLUNTARY), GIL_OK);
    CHECK_RESULT(gil_free(gil), GIL_OK);
    /* The same under every lazy preset. */
    static const char *const lazy_presets[] = {"lazy", "priority-lazy", "priority-lazy-monitor"};
    for (size_t i = 0; i < sizeof lazy_presets / sizeof lazy_presets[0]; i++) {
        gil_config_t lc;
        gil_t *lg = NULL;
        CHECK_RESULT(gil_config_preset(lazy_presets[i], &lc), GIL_OK);
        CHECK_RESULT(gil_new(&lc, &lg), GIL_OK);
        CHECK_RESULT(gil_acquire(lg, &me), GIL_OK);
        CHECK_RESULT(gil_release(lg, &me, GIL_RELEASE_VOLUNTARY), GIL_OK);
        CHECK_RESULT(gil_is_reserved(lg, &reserved), GIL_OK);
        CHECK(reserved);
        CHECK_RESULT(gil_free(lg), GIL_OK);
    }

    /* An older, shorter config has no lazy_release_us: off. */
    CHECK_RESULT(gil_config_init(&config), GIL_OK);
    config.struct_size = (uint32_t)offsetof(gil_config_t, lazy_release_us);
    config.lazy_release_us = 1000; /* beyond struct_size: ignored */
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    CHECK_RESULT(gil_get_lazy_release(gil, &lazy), GIL_OK);
    CHECK(lazy == 0);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

/* ---- the monitor, events, histograms -------------------------------------- */

enum { MAX_EVENTS = 4096 };

struct event_log {
    pthread_mutex_t mutex;
    size_t n;
    gil_event_t events[MAX_EVENTS];
};

static void record_event(void *user_data, const gil_event_t *event) {
    struct event_log *log = user_data;
    pthread_mutex_lock(&log->mutex);
    if (log->n < MAX_EVENTS) log->events[log->n++] = *event;
    pthread_mutex_unlock(&log->mutex);
}

struct spinner {
    gil_t *gil;
    int switches_wanted;
    int switches;
};

/* A CPU-bound thread polling the drop-request flag. */
static void *spin_worker(void *arg) {
    struct spinner *s = arg;
    if (gil_acquire(s->gil, s) != GIL_OK) abort();
    while (s->switches < s->switches_wanted) {
        bool handled = false;
        if (gil_handle_drop_request(s->gil, s, &handled) != GIL_OK) abort();
        if (handled) s->switches++;
    }
    if (gil_release(s->gil, s, GIL_RELEASE_FINAL) != GIL_OK) abort();
    return NULL;
}

static void test_monitor_events_histograms(void) {
    gil_config_t config;
    gil_t *gil = NULL;
    CHECK_RESULT(gil_config_preset("priority-monitor", &config), GIL_OK);
    CHECK(config.monitor == 1 && config.policy == GIL_POLICY_PRIORITY);
    config.switch_interval_us = 500;
    config.spin_us = 10001; /* above the 10 ms maximum */
    CHECK_RESULT(gil_new(&config, &gil), GIL_ERR_INVALID_CONFIG);
    config.spin_us = 20;
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    uint64_t spin = 0;
    CHECK_RESULT(gil_get_spin(gil, &spin), GIL_OK);
    CHECK(spin == 20);
    uint32_t laps = 99;
    CHECK_RESULT(gil_get_laps(gil, &laps), GIL_OK);
    CHECK(laps == 0); /* no bound unless asked */
    CHECK_RESULT(gil_free(gil), GIL_OK);
    gil = NULL;
    config.laps = GIL_MAX_LAPS + 1;
    CHECK_RESULT(gil_new(&config, &gil), GIL_ERR_INVALID_CONFIG);
    config.laps = GIL_SERVER_LAPS;
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    CHECK_RESULT(gil_get_laps(gil, &laps), GIL_OK);
    CHECK(laps == GIL_SERVER_LAPS);
    bool monitor = false;
    CHECK_RESULT(gil_get_monitor(gil, &monitor), GIL_OK);
    CHECK(monitor);

    static struct event_log log;
    pthread_mutex_init(&log.mutex, NULL);
    log.n = 0;
    CHECK_RESULT(gil_set_event_hook(gil, record_event, &log), GIL_OK);
    bool hist_on = false;
    CHECK_RESULT(gil_get_histograms_enabled(gil, &hist_on), GIL_OK);
    CHECK(!hist_on);
    CHECK_RESULT(gil_set_histograms(gil, true), GIL_OK);
    CHECK_RESULT(gil_get_histograms_enabled(gil, &hist_on), GIL_OK);
    CHECK(hist_on);

    struct spinner sp[2] = {{gil, 3, 0}, {gil, 3, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, spin_worker, &sp[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK_RESULT(gil_set_event_hook(gil, NULL, NULL), GIL_OK);
    size_t n = log.n; /* no hook runs any more */
    CHECK(n > 0 && n < MAX_EVENTS);

    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK_RESULT(gil_get_counters(gil, &c), GIL_OK);
    uint64_t acquired = 0, released = 0, monitor_requests = 0;
    void *holder = NULL;
    int alternation_ok = 1;
    for (size_t i = 0; i < n; i++) {
        const gil_event_t *e = &log.events[i];
        if (i > 0 && e->time_ns + 1000000 < log.events[i - 1].time_ns) alternation_ok = 0;
        switch (e->kind) {
        case GIL_EVENT_ACQUIRED:
            if (holder != NULL) alternation_ok = 0;
            holder = e->token;
            acquired++;
            break;
        case GIL_EVENT_RELEASED:
            if (holder != e->token) alternation_ok = 0;
            holder = NULL;
            released++;
            break;
        case GIL_EVENT_DROP_REQUESTED:
            if (e->other == NULL) monitor_requests++;
            break;
        default:
            break;
        }
    }
    CHECK(alternation_ok);
    CHECK(acquired == c.acquisitions && released == acquired);
    CHECK(monitor_requests > 0);           /* CPU vs CPU: the monitor's interval */
    CHECK(c.forced_switches >= 6);
    CHECK(gil_monitor_wakeups() > 0);
    CHECK(gil_now_ns() >= log.events[n - 1].time_ns);

    gil_histograms_t h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h - 1;
    CHECK_RESULT(gil_get_histograms(gil, &h), GIL_ERR_INVALID_ARGUMENT);
    h.struct_size = sizeof h;
    CHECK_RESULT(gil_get_histograms(gil, &h), GIL_OK);
    uint64_t holds = 0, waits = 0, fine_holds = 0, fine_waits = 0;
    for (size_t i = 0; i < GIL_HISTOGRAM_BUCKETS; i++) {
        holds += h.hold[i];
        waits += h.wait[i];
    }
    for (size_t i = 0; i < GIL_HISTOGRAM_FINE_BUCKETS; i++) {
        fine_holds += h.hold_fine[i];
        fine_waits += h.wait_fine[i];
    }
    CHECK(holds == c.acquisitions);
    CHECK(waits >= 6);
    CHECK(fine_holds == holds && fine_waits == waits);
    /* Power-of-two bucket 10, [1024, 2048) ns, is fine buckets 64..71. */
    uint64_t fine10 = 0;
    for (size_t i = 8 + 8 * (10 - 3); i < 8 + 8 * (10 - 3) + 8; i++) {
        fine10 += h.hold_fine[i];
    }
    CHECK(fine10 == h.hold[10]);
    /* A caller built against 0.1's header passes its smaller struct_size
       and gets the fields it knows; nothing past them is written. */
    gil_histograms_t old;
    memset(&old, 0xab, sizeof old);
    old.struct_size = (uint32_t)offsetof(gil_histograms_t, wait_fine);
    CHECK_RESULT(gil_get_histograms(gil, &old), GIL_OK);
    CHECK(old.struct_size == offsetof(gil_histograms_t, wait_fine));
    CHECK(old.reserved == 0);
    uint64_t old_holds = 0;
    for (size_t i = 0; i < GIL_HISTOGRAM_BUCKETS; i++) {
        old_holds += old.hold[i];
    }
    CHECK(old_holds == holds);
    CHECK(old.wait_fine[0] == 0xababababababababULL && old.hold_fine[GIL_HISTOGRAM_FINE_BUCKETS - 1] == 0xababababababababULL);
    old.struct_size = (uint32_t)offsetof(gil_histograms_t, wait_fine) + 8;
    CHECK_RESULT(gil_get_histograms(gil, &old), GIL_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(gil_reset_histograms(gil), GIL_OK);
    CHECK_RESULT(gil_get_histograms(gil, &h), GIL_OK);
    CHECK(h.hold[0] == 0 && h.wait[10] == 0 && h.hold_fine[0] == 0 && h.wait_fine[64] == 0);
    CHECK_RESULT(gil_set_histograms(NULL, true), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_free(gil), GIL_OK);
    pthread_mutex_destroy(&log.mutex);
}

/* ---- traces --------------------------------------------------------------- */

static size_t count_substr(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The whole file, NUL-terminated (caller frees); NULL if unreadable. */
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) free(buf);
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL) buf[len] = '\0';
    return buf;
}

static void test_traces(void) {
    char dir[] = "/tmp/gil-trace-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char json[64], svg[64], bad[64], missing[96];
    snprintf(json, sizeof json, "%s/t.json", dir);
    snprintf(svg, sizeof svg, "%s/t.svg", dir);
    snprintf(bad, sizeof bad, "%s/t.txt", dir);
    snprintf(missing, sizeof missing, "%s/no/such/dir/t.svg", dir);
    gil_t *gil = new_gil(300, NULL, NULL);
    uint64_t events = 0;

    /* Misuse first: nothing runs, nothing changes. */
    CHECK_RESULT(gil_trace_start(NULL, json, NULL, 0), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_trace_start(gil, NULL, NULL, 0), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_trace_start(gil, bad, NULL, 0), GIL_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(gil_trace_start(gil, missing, NULL, 0), GIL_ERR_IO);
#ifndef _WIN32 /* symlink() is POSIX */
    /* A link at the name is refused, never followed: its target is untouched. */
    char target[96], link_name[64];
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(link_name, sizeof link_name, "%s/link.json", dir);
    FILE *t = fopen(target, "w");
    CHECK(t != NULL);
    fputs("precious", t);
    fclose(t);
    CHECK(symlink(target, link_name) == 0);
    CHECK_RESULT(gil_trace_start(gil, link_name, NULL, 0), GIL_ERR_IO);
    char *kept = read_file(target);
    CHECK(kept != NULL && strcmp(kept, "precious") == 0);
    free(kept);
    unlink(link_name);
    unlink(target);
#endif
    CHECK_RESULT(gil_trace_stop(gil, &events), GIL_ERR_NOT_TRACING);
    int token = 0;
    CHECK_RESULT(gil_trace_name_thread(gil, &token, "x"), GIL_ERR_NOT_TRACING);
    static struct event_log log;
    pthread_mutex_init(&log.mutex, NULL);
    log.n = 0;
    /* A host's hook runs beside the trace. */
    CHECK_RESULT(gil_set_event_hook(gil, record_event, &log), GIL_OK);

    /* A JSON trace of two spinners: a complete event per state stretch. */
    CHECK_RESULT(gil_trace_start(gil, json, "two \"spinners\"", 0), GIL_OK);
    CHECK_RESULT(gil_trace_start(gil, svg, NULL, 0), GIL_ERR_BUSY); /* one trace at a time */
    struct spinner sp[2] = {{gil, 3, 0}, {gil, 3, 0}};
    CHECK_RESULT(gil_trace_name_thread(gil, &sp[0], "first <spinner>"), GIL_OK);
    CHECK_RESULT(gil_trace_name_thread(gil, NULL, "x"), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_trace_name_thread(gil, &sp[0], NULL), GIL_ERR_NULL_ARGUMENT);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, spin_worker, &sp[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK_RESULT(gil_trace_stop(gil, &events), GIL_OK);
    CHECK_RESULT(gil_trace_stop(gil, &events), GIL_ERR_NOT_TRACING);
    CHECK_RESULT(gil_set_event_hook(gil, NULL, NULL), GIL_OK);
    /* The host's hook saw what the trace saw (the spinners' events only:
     * both were installed before the threads started). */
    CHECK(log.n == events);
    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK_RESULT(gil_get_counters(gil, &c), GIL_OK);
    /* Each acquisition and each release is an event; drop requests too. */
    CHECK(events >= 2 * c.acquisitions + c.drop_requests);
    char *text = read_file(json);
    CHECK(text != NULL);
    if (text != NULL) {
        CHECK(strstr(text, "\"traceEvents\"") != NULL);
        CHECK(strstr(text, "\"title\":\"two \\\"spinners\\\"\"") != NULL);
        CHECK(strstr(text, "\"name\":\"first <spinner>\"") != NULL);
        /* Both threads ran once per acquisition. */
        CHECK(count_substr(text, "\"name\":\"running\"") == c.acquisitions);
        CHECK(count_substr(text, "\"name\":\"forced_switch\"") == c.forced_switches);
        free(text);
    }

    /* An SVG trace, with the hook free again afterwards. */
    CHECK_RESULT(gil_trace_start(gil, svg, NULL, 16), GIL_OK);
    sp[0].switches = sp[1].switches = 0;
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, spin_worker, &sp[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK_RESULT(gil_trace_stop(gil, NULL), GIL_OK);
    text = read_file(svg);
    CHECK(text != NULL);
    if (text != NULL) {
        CHECK(strncmp(text, "<svg", 4) == 0);
        CHECK(strstr(text, "</svg>") != NULL);
        CHECK(strstr(text, "events lost") != NULL); /* only 16 were kept */
        free(text);
    }
    CHECK_RESULT(gil_set_event_hook(gil, record_event, &log), GIL_OK);
    CHECK_RESULT(gil_set_event_hook(gil, NULL, NULL), GIL_OK);
    CHECK_RESULT(gil_free(gil), GIL_OK);
    pthread_mutex_destroy(&log.mutex);
    unlink(json);
    unlink(svg);
    rmdir(dir);
}

/* Two hooks with their own masks, added and removed by handle. */
static void test_several_hooks(void) {
    gil_t *gil = new_gil(300, NULL, NULL);
    static struct event_log all, acquired;
    pthread_mutex_init(&all.mutex, NULL);
    pthread_mutex_init(&acquired.mutex, NULL);
    all.n = acquired.n = 0;
    gil_hook_id_t id_all = 0, id_acq = 0, id = 0;

    /* Bad input: nothing is installed. */
    CHECK_RESULT(gil_add_event_hook(gil, record_event, &all, 0, &id), GIL_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(gil_add_event_hook(gil, record_event, &all, GIL_EVENT_MASK_ALL + 1, &id),
                 GIL_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(gil_add_event_hook(gil, NULL, &all, GIL_EVENT_MASK_ALL, &id), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_add_event_hook(gil, record_event, &all, GIL_EVENT_MASK_ALL, NULL),
                 GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_add_event_hook(NULL, record_event, &all, GIL_EVENT_MASK_ALL, &id),
                 GIL_ERR_NULL_ARGUMENT);
    CHECK(id == 0);
    CHECK_RESULT(gil_remove_event_hook(gil, 12345), GIL_ERR_UNKNOWN_HOOK);

    CHECK_RESULT(gil_add_event_hook(gil, record_event, &all, GIL_EVENT_MASK_ALL, &id_all), GIL_OK);
    CHECK_RESULT(gil_add_event_hook(gil, record_event, &acquired, GIL_EVENT_MASK_ACQUIRED, &id_acq),
                 GIL_OK);
    CHECK(id_all != 0 && id_acq != 0 && id_all != id_acq);
    struct spinner sp[2] = {{gil, 3, 0}, {gil, 3, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, spin_worker, &sp[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK_RESULT(gil_remove_event_hook(gil, id_acq), GIL_OK);
    CHECK_RESULT(gil_remove_event_hook(gil, id_acq), GIL_ERR_UNKNOWN_HOOK); /* twice */
    /* The first hook still runs alone. */
    size_t before = all.n;
    int me = 0;
    CHECK_RESULT(gil_acquire(gil, &me), GIL_OK);
    CHECK_RESULT(gil_release(gil, &me, GIL_RELEASE_FINAL), GIL_OK);
    CHECK(all.n == before + 2);
    CHECK_RESULT(gil_remove_event_hook(gil, id_all), GIL_OK);

    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK_RESULT(gil_get_counters(gil, &c), GIL_OK);
    /* The masked hook saw exactly the acquisitions of the spinners, and
     * the same ones the other hook saw, in the same order. */
    size_t n_acq_in_all = 0;
    for (size_t i = 0; i < before; i++) {
        if (all.events[i].kind != GIL_EVENT_ACQUIRED) continue;
        CHECK(n_acq_in_all < acquired.n && acquired.events[n_acq_in_all].token == all.events[i].token &&
              acquired.events[n_acq_in_all].time_ns == all.events[i].time_ns);
        n_acq_in_all++;
    }
    CHECK(acquired.n == n_acq_in_all);
    CHECK(acquired.n + 1 == c.acquisitions);
    for (size_t i = 0; i < acquired.n; i++) CHECK(acquired.events[i].kind == GIL_EVENT_ACQUIRED);
    CHECK_RESULT(gil_free(gil), GIL_OK);
    pthread_mutex_destroy(&all.mutex);
    pthread_mutex_destroy(&acquired.mutex);
}

/* Per-thread accounting: sums over threads match the lock's counters. */
struct stats_sum {
    size_t threads;
    uint64_t acquisitions, forced, named, tags;
};

static int add_stats(void *user_data, const gil_thread_stats_t *s) {
    struct stats_sum *sum = user_data;
    sum->threads++;
    sum->acquisitions += s->acquisitions;
    sum->forced += s->forced_releases;
    sum->tags += s->tag;
    if (s->name != NULL && strcmp(s->name, "spinner \xc3\xa9") == 0) sum->named++;
    return 0;
}

static int stop_at_first(void *user_data, const gil_thread_stats_t *s) {
    (void)s;
    (*(int *)user_data)++;
    return 1;
}

static void test_thread_stats(void) {
    gil_t *gil = new_gil(300, NULL, NULL);
    bool on = true;
    CHECK_RESULT(gil_get_thread_stats_enabled(gil, &on), GIL_OK);
    CHECK(!on);
    CHECK_RESULT(gil_set_thread_stats(gil, true), GIL_OK);
    CHECK_RESULT(gil_get_thread_stats_enabled(gil, &on), GIL_OK);
    CHECK(on);
    struct spinner sp[2] = {{gil, 3, 0}, {gil, 3, 0}};
    CHECK_RESULT(gil_name_thread(gil, &sp[0], "spinner \xc3\xa9"), GIL_OK);
    CHECK_RESULT(gil_tag_thread(gil, &sp[1], 7), GIL_ERR_UNKNOWN_THREAD); /* no record yet */
    /* The token's record starts with an acquisition; its thread goes on
     * with it (a voluntary release does not end it). */
    CHECK_RESULT(gil_acquire(gil, &sp[1]), GIL_OK);
    CHECK_RESULT(gil_tag_thread(gil, &sp[1], 7), GIL_OK);
    CHECK_RESULT(gil_release(gil, &sp[1], GIL_RELEASE_VOLUNTARY), GIL_OK);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, spin_worker, &sp[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);

    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK_RESULT(gil_get_counters(gil, &c), GIL_OK);
    struct stats_sum sum = {0};
    CHECK_RESULT(gil_foreach_thread_stats(gil, add_stats, &sum), GIL_OK);
    CHECK(sum.threads == 2);
    CHECK(sum.acquisitions == c.acquisitions);
    CHECK(sum.forced == (uint64_t)(sp[0].switches + sp[1].switches));
    CHECK(sum.named == 1 && sum.tags == 7);
    int calls = 0;
    CHECK_RESULT(gil_foreach_thread_stats(gil, stop_at_first, &calls), GIL_OK);
    CHECK(calls == 1);

    gil_thread_stats_t s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_RESULT(gil_get_thread_stats(gil, &sp[1], &s), GIL_OK);
    CHECK(s.token == &sp[1] && s.tag == 7 && s.alive == 0 && s.ended_ns >= s.first_ns);
    CHECK(s.hold_ns > 0 && s.acquisitions >= 1 && s.name == NULL);
    int stranger = 0;
    CHECK_RESULT(gil_get_thread_stats(gil, &stranger, &s), GIL_ERR_UNKNOWN_THREAD);
    s.struct_size = 8;
    CHECK_RESULT(gil_get_thread_stats(gil, &sp[1], &s), GIL_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(gil_get_thread_stats(gil, &sp[1], NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_foreach_thread_stats(gil, NULL, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_name_thread(gil, &sp[0], NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

/* A thread known by its tag is named after it ended, in the trace too. */
static void test_name_by_tag(void) {
    char dir[] = "/tmp/gil-tag-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char json[64];
    snprintf(json, sizeof json, "%s/n.json", dir);
    gil_t *gil = new_gil(300, NULL, NULL);
    CHECK_RESULT(gil_set_thread_stats(gil, true), GIL_OK);
    CHECK_RESULT(gil_trace_start(gil, json, NULL, 0), GIL_OK);
    int worker = 0;
    for (int life = 0; life < 2; life++) { /* the same token, two lives */
        CHECK_RESULT(gil_acquire(gil, &worker), GIL_OK);
        CHECK_RESULT(gil_tag_thread(gil, &worker, 77 + (uint64_t)life), GIL_OK);
        CHECK_RESULT(gil_release(gil, &worker, GIL_RELEASE_FINAL), GIL_OK);
    }
    CHECK_RESULT(gil_name_tagged(gil, 77, 0, "first life"), GIL_OK);
    CHECK_RESULT(gil_name_tagged(gil, 78, 0, "second life"), GIL_OK);
    CHECK_RESULT(gil_name_tagged(gil, 79, 0, "nobody"), GIL_ERR_UNKNOWN_THREAD);
    CHECK_RESULT(gil_name_tagged(gil, 77, gil_now_ns(), "not yet"), GIL_ERR_UNKNOWN_THREAD);
    CHECK_RESULT(gil_name_tagged(gil, 77, 0, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_trace_stop(gil, NULL), GIL_OK);
    char *text = read_file(json);
    CHECK(text != NULL);
    if (text != NULL) {
        const char *first = strstr(text, "\"name\":\"first life\"");
        const char *second = strstr(text, "\"name\":\"second life\"");
        CHECK(first != NULL && second != NULL && first < second);
        free(text);
    }
    CHECK_RESULT(gil_free(gil), GIL_OK);
    unlink(json);
    rmdir(dir);
}

/* ---- accounting: names, the holder's record, foreign tags, cancellation -- */

#ifndef _WIN32 /* fork */
static void expect_exit(pid_t pid, const char *what);
#endif /* !_WIN32 */
static volatile int lsan_off;

/* Counts the records and those inconsistent: ending before they begin, or
   charged more time than they lived (up to `now` for a live one). */
struct record_check {
    uint64_t now;
    size_t records, inconsistent;
    const void *want; /* a token whose name to copy, or NULL */
    char name[32];
};

static int check_record(void *user_data, const gil_thread_stats_t *s) {
    struct record_check *c = user_data;
    uint64_t end = s->alive ? c->now : s->ended_ns;
    c->records++;
    if (s->first_ns > end || s->wait_ns + s->hold_ns + s->call_ns > end - s->first_ns) c->inconsistent++;
    if (s->token == c->want && s->name != NULL) snprintf(c->name, sizeof c->name, "%s", s->name);
    return 0;
}

static struct record_check check_records(gil_t *gil, const void *want) {
    struct record_check c;
    memset(&c, 0, sizeof c);
    c.want = want;
    c.now = gil_now_ns();
    CHECK_RESULT(gil_foreach_thread_stats(gil, check_record, &c), GIL_OK);
    return c;
}

/* A name alone makes no record: a named token that never used the lock is
   unknown and not listed, however many are named (the names wait, the last
   1024 kept, for the tokens' first events). */
static void test_names_make_no_records(void) {
    enum { NAMED = 5000 };
    static char tokens[NAMED];
    gil_t *gil = new_gil(300, NULL, NULL);
    CHECK_RESULT(gil_set_thread_stats(gil, true), GIL_OK);
    for (int i = 0; i < NAMED; i++) {
        char name[32];
        snprintf(name, sizeof name, "named %d", i);
        CHECK_RESULT(gil_name_thread(gil, &tokens[i], name), GIL_OK);
    }
    /* On, off, a name, on: nothing to end before it began. */
    CHECK_RESULT(gil_set_thread_stats(gil, false), GIL_OK);
    CHECK_RESULT(gil_name_thread(gil, &tokens[1], "named while off"), GIL_OK);
    CHECK_RESULT(gil_set_thread_stats(gil, true), GIL_OK);
    gil_thread_stats_t s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_RESULT(gil_get_thread_stats(gil, &tokens[0], &s), GIL_ERR_UNKNOWN_THREAD);
    CHECK_RESULT(gil_get_thread_stats(gil, &tokens[1], &s), GIL_ERR_UNKNOWN_THREAD);
    CHECK_RESULT(gil_get_thread_stats(gil, &tokens[NAMED - 1], &s), GIL_ERR_UNKNOWN_THREAD);
    CHECK(check_records(gil, NULL).records == 0);
    /* The newest name went to its token's record; the oldest was dropped. */
    for (int i = 0; i < NAMED; i += NAMED - 1) {
        CHECK_RESULT(gil_acquire(gil, &tokens[i]), GIL_OK);
        CHECK_RESULT(gil_release(gil, &tokens[i], GIL_RELEASE_FINAL), GIL_OK);
    }
    struct record_check c = check_records(gil, &tokens[NAMED - 1]);
    CHECK(c.records == 2 && c.inconsistent == 0);
    CHECK(strcmp(c.name, "named 4999") == 0);
    c = check_records(gil, &tokens[0]);
    CHECK(c.name[0] == '\0');
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

/* The holder that turns accounting on is measured from then once it tags
   its token: a CPU-bound stretch right after reads as held time. */
static void test_holder_tags_itself(void) {
    gil_t *gil = new_gil(300, NULL, NULL);
    int me = 0, other = 0;
    CHECK_RESULT(gil_acquire(gil, &me), GIL_OK);
    CHECK_RESULT(gil_tag_thread(gil, &me, 1), GIL_ERR_UNKNOWN_THREAD); /* accounting off */
    CHECK_RESULT(gil_set_thread_stats(gil, true), GIL_OK);
    gil_thread_stats_t s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_RESULT(gil_get_thread_stats(gil, &me, &s), GIL_ERR_UNKNOWN_THREAD);
    CHECK_RESULT(gil_tag_thread(gil, &other, 2), GIL_ERR_UNKNOWN_THREAD); /* not the holder */
    uint64_t before = gil_now_ns();
    CHECK_RESULT(gil_tag_thread(gil, &me, 1), GIL_OK);
    CHECK_RESULT(gil_get_thread_stats(gil, &me, &s), GIL_OK);
    CHECK(s.alive == 1 && s.tag == 1 && s.acquisitions == 0 && s.first_ns >= before);
    uint64_t first = s.first_ns;
    while (gil_now_ns() <= first) {
    } /* CPU-bound */
    CHECK_RESULT(gil_get_thread_stats(gil, &me, &s), GIL_OK);
    CHECK(s.hold_ns > 0 && s.wait_ns == 0 && s.call_ns == 0);
    CHECK_RESULT(gil_release(gil, &me, GIL_RELEASE_FINAL), GIL_OK);
    CHECK_RESULT(gil_get_thread_stats(gil, &me, &s), GIL_OK);
    CHECK(s.alive == 0 && s.first_ns == first && s.ended_ns >= first && s.hold_ns <= s.ended_ns - first);
    struct record_check c = check_records(gil, NULL);
    CHECK(c.records == 1 && c.inconsistent == 0);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

struct foreign_tag {
    gil_t *gil;
    void *token;
    gil_result_t got;
};

static void *tag_from_elsewhere(void *arg) {
    struct foreign_tag *f = arg;
    f->got = gil_tag_thread(f->gil, f->token, 99);
    return NULL;
}

/* A record has one writer: a tag from a thread other than the token's is
   refused, and the record is left whole. */
static void test_foreign_tag_refused(void) {
    gil_t *gil = new_gil(300, NULL, NULL);
    CHECK_RESULT(gil_set_thread_stats(gil, true), GIL_OK);
    int me = 0;
    CHECK_RESULT(gil_acquire(gil, &me), GIL_OK);
    CHECK_RESULT(gil_tag_thread(gil, &me, 1), GIL_OK);
    struct foreign_tag f = {gil, &me, GIL_OK};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, tag_from_elsewhere, &f) == 0);
    pthread_join(th, NULL);
    CHECK_RESULT(f.got, GIL_ERR_FOREIGN_THREAD);
    CHECK(strcmp(gil_result_str(GIL_ERR_FOREIGN_THREAD), "unknown result code") != 0);
    CHECK(strcmp(gil_result_str(GIL_ERR_OTHER), "unknown result code") != 0);
    gil_thread_stats_t s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_RESULT(gil_get_thread_stats(gil, &me, &s), GIL_OK);
    CHECK(s.tag == 1 && s.alive == 1);
    CHECK(check_records(gil, NULL).records == 1);
    CHECK_RESULT(gil_release(gil, &me, GIL_RELEASE_VOLUNTARY), GIL_OK);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

#ifndef _WIN32 /* pthread_cancel */
struct cancel_foreach {
    gil_t *gil;
    atomic_int calls;
    atomic_int returned;
};

static int cancel_point_in_callback(void *user_data, const gil_thread_stats_t *s) {
    (void)s;
    atomic_fetch_add((atomic_int *)user_data, 1);
    pthread_testcancel(); /* a cancellation point, with a cancel pending */
    return 0;
}

static void *foreach_with_cancel_pending(void *arg) {
    struct cancel_foreach *c = arg;
    int token = 0;
    if (gil_acquire(c->gil, &token) != GIL_OK || gil_release(c->gil, &token, GIL_RELEASE_VOLUNTARY) != GIL_OK)
        return NULL;
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
    pthread_cancel(pthread_self()); /* pending: no cancellation point until the callback's */
    gil_result_t r = gil_foreach_thread_stats(c->gil, cancel_point_in_callback, &c->calls);
    atomic_store(&c->returned, r == GIL_OK ? 1 : 2);
    for (;;) pthread_testcancel();
}

/* A thread with a pending deferred cancel that reaches a cancellation point
   inside a gil_foreach_thread_stats callback is not cancelled there (a
   forced unwind through the library aborts the process) but at its next
   cancellation point after the call. In a child, since the failure is an
   abort. */
static void test_cancel_in_foreach_callback(void) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        lsan_off = 1;
        gil_t *gil = new_gil(1000, NULL, NULL);
        if (gil_set_thread_stats(gil, true) != GIL_OK) _exit(2);
        struct cancel_foreach c = {gil, 0, 0};
        pthread_t th;
        if (pthread_create(&th, NULL, foreach_with_cancel_pending, &c) != 0) _exit(3);
        void *ret = NULL;
        if (pthread_join(th, &ret) != 0) _exit(4);
        if (ret != PTHREAD_CANCELED) _exit(5);
        if (atomic_load(&c.calls) != 1 || atomic_load(&c.returned) != 1) _exit(6);
        _exit(gil_free(gil) == GIL_OK ? 0 : 7);
    }
    if (pid > 0) expect_exit(pid, "cancel in a foreach callback");
}
#endif /* !_WIN32 */

/* A ring trace keeps the last events. */
static void test_ring_trace(void) {
    char dir[] = "/tmp/gil-ring-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char json[64];
    snprintf(json, sizeof json, "%s/r.json", dir);
    gil_t *gil = new_gil(300, NULL, NULL);
    CHECK_RESULT(gil_trace_start_ex(gil, json, NULL, 8, 2), GIL_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(gil_trace_start_ex(gil, json, NULL, 8, GIL_TRACE_RING), GIL_OK);
    int me = 0;
    for (int i = 0; i < 100; i++) {
        CHECK_RESULT(gil_acquire(gil, &me), GIL_OK);
        CHECK_RESULT(gil_release(gil, &me, GIL_RELEASE_VOLUNTARY), GIL_OK);
    }
    uint64_t events = 0;
    CHECK_RESULT(gil_trace_stop(gil, &events), GIL_OK);
    CHECK(events == 8);
    char *text = read_file(json);
    CHECK(text != NULL);
    if (text != NULL) {
        CHECK(strstr(text, "\"ring\":true") != NULL);
        CHECK(strstr(text, "\"dropped_events\":192") != NULL);
        free(text);
    }
    CHECK_RESULT(gil_free(gil), GIL_OK);
    unlink(json);
    rmdir(dir);
}

/* Whether `path` holds exactly one whole Chrome JSON trace titled `title`:
   no NUL byte, one header, one end. */
static int whole_json_trace(const char *path, const char *title) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    char *text = read_file(path);
    if (text == NULL) return 0;
    char want_title[128];
    snprintf(want_title, sizeof want_title, "\"title\":\"%s\"", title);
    size_t len = strlen(text);
    int whole = size >= 0 && (size_t)size == len && strncmp(text, "{\"displayTimeUnit\"", 18) == 0 &&
                len >= 4 && strcmp(text + len - 4, "\n]}\n") == 0 && count_substr(text, "\n]}\n") == 1 &&
                count_substr(text, "\"traceEvents\"") == 1 && strstr(text, want_title) != NULL;
    if (!whole) fprintf(stderr, "  %s: %zu of %ld bytes, not one whole trace titled %s\n", path, len, size, title);
    free(text);
    return whole;
}

/* Whether `dir` holds any file but `name` (a temporary trace file). */
static int other_files_in(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    int others = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strcmp(e->d_name, name) != 0) others++;
    }
    closedir(d);
    return others;
}

/* `n` acquisitions and releases of the lock by one token: 2n events. */
static void traffic(gil_t *gil, int n) {
    int me = 0;
    for (int i = 0; i < n; i++) {
        if (gil_acquire(gil, &me) != GIL_OK || gil_release(gil, &me, GIL_RELEASE_VOLUNTARY) != GIL_OK) abort();
    }
    if (gil_acquire(gil, &me) != GIL_OK || gil_release(gil, &me, GIL_RELEASE_FINAL) != GIL_OK) abort();
}

/* Two traces on one path, the second started before the first is written:
   each stop leaves one whole trace (before, the second emptied the file
   and wrote its short trace over the start of the long one). */
static void test_trace_same_path_twice(void) {
    char dir[] = "/tmp/gil-same-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char json[64];
    snprintf(json, sizeof json, "%s/t.json", dir);
    gil_t *a = new_gil(300, NULL, NULL), *b = new_gil(300, NULL, NULL);
    CHECK_RESULT(gil_trace_start(a, json, "long", 0), GIL_OK);
    traffic(a, 5000);
    CHECK_RESULT(gil_trace_start(b, json, "short", 0), GIL_OK);
    traffic(b, 2);
    CHECK_RESULT(gil_trace_stop(a, NULL), GIL_OK);
    CHECK(whole_json_trace(json, "long"));
    CHECK_RESULT(gil_trace_stop(b, NULL), GIL_OK);
    CHECK(whole_json_trace(json, "short"));
    CHECK(other_files_in(dir, "t.json") == 0); /* no temporary file left */
    CHECK_RESULT(gil_free(a), GIL_OK);
    CHECK_RESULT(gil_free(b), GIL_OK);
    unlink(json);
    rmdir(dir);
}

#ifdef _WIN32
/* gil.h's recipe for a Windows program whose name is in the ANSI code
   page (as argv, getenv and fopen have it): to UTF-16, then to UTF-8. */
static int ansi_to_utf8(const char *ansi, char *out, int out_len) {
    wchar_t wide[MAX_PATH];
    if (MultiByteToWideChar(CP_ACP, MB_ERR_INVALID_CHARS, ansi, -1, wide, MAX_PATH) == 0) return -1;
    return WideCharToMultiByte(CP_UTF8, 0, wide, -1, out, out_len, NULL, NULL) > 0 ? 0 : -1;
}

/* Whether the file named `wide` (UTF-16, as Windows holds names) holds a
   whole trace; removes it. */
static int wide_file_has_trace(const wchar_t *wide) {
    FILE *f = _wfopen(wide, L"rb");
    if (f == NULL) return 0;
    char head[32] = {0};
    size_t got = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    _wunlink(wide);
    return got > 0 && strncmp(head, "{\"displayTimeUnit\"", 18) == 0;
}
#endif

/* File names are UTF-8 on every OS (gil.h): "\xc3\xa9\xe2\x82\xac.json" is
   the file U+00E9 U+20AC ".json" (e acute, euro sign), on Windows too,
   whatever the ANSI code page; there,
   the same name in the ANSI code page is not UTF-8 and is refused, and
   gil.h's conversion makes it the UTF-8 name. */
static void test_non_ascii_trace_name(void) {
    char dir[] = "/tmp/gil-utf8-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[96];
    snprintf(path, sizeof path, "%s/\xc3\xa9\xe2\x82\xac.json", dir);
    gil_t *gil = new_gil(300, NULL, NULL);
    CHECK_RESULT(gil_trace_start(gil, path, NULL, 0), GIL_OK);
    traffic(gil, 2);
    CHECK_RESULT(gil_trace_stop(gil, NULL), GIL_OK);
#ifdef _WIN32
    /* Asked for by its UTF-16 name, written here without UTF-8. */
    wchar_t wide[96];
    CHECK(mbstowcs(wide, dir, 64) == strlen(dir)); /* ASCII */
    wcscat(wide, L"/\u00e9\u20ac.json");
    CHECK(wide_file_has_trace(wide));
    wchar_t wide_e[96];
    CHECK(mbstowcs(wide_e, dir, 64) == strlen(dir));
    wcscat(wide_e, L"/\u00e9.json");
    char ansi[96];
    BOOL lossy = FALSE;
    if (GetACP() == CP_UTF8) {
        fprintf(stderr, "  (the ANSI code page is UTF-8: nothing to refuse)\n");
    } else if (WideCharToMultiByte(CP_ACP, 0, wide_e, -1, ansi, sizeof ansi, NULL, &lossy) == 0 || lossy) {
        fprintf(stderr, "  (no \\u00e9 in ANSI code page %u: its refusal not checked)\n", GetACP());
    } else {
        CHECK_RESULT(gil_trace_start(gil, ansi, NULL, 0), GIL_ERR_INVALID_ARGUMENT);
        char utf8[96];
        CHECK(ansi_to_utf8(ansi, utf8, sizeof utf8) == 0);
        CHECK_RESULT(gil_trace_start(gil, utf8, NULL, 0), GIL_OK);
        traffic(gil, 2);
        CHECK_RESULT(gil_trace_stop(gil, NULL), GIL_OK);
        CHECK(wide_file_has_trace(wide_e));
    }
#else
    char *text = read_file(path);
    CHECK(text != NULL && strncmp(text, "{\"displayTimeUnit\"", 18) == 0);
    free(text);
    unlink(path);
#endif
    CHECK(other_files_in(dir, "") == 0);
    CHECK_RESULT(gil_free(gil), GIL_OK);
    rmdir(dir);
}

#ifndef _WIN32 /* a file open elsewhere cannot be replaced on Windows */
struct trace_stopper {
    gil_t *gil;
    gil_result_t got;
    atomic_int done;
};

static void *stop_trace(void *arg) {
    struct trace_stopper *s = arg;
    s->got = gil_trace_stop(s->gil, NULL);
    atomic_store(&s->done, 1);
    return NULL;
}

/* One thread stops a long trace while another starts (and stops) a trace
   of the same lock on the same path: once the stop has taken the trace, a
   start is accepted while it writes. The file is one whole trace after.
   POSIX-only: the test reads the file (fopen) while a trace replaces it,
   and on Windows a file another handle has open without FILE_SHARE_DELETE
   cannot be renamed over (GIL_ERR_IO; seen under Wine). */
static void test_trace_start_while_stop_writes(void) {
    char dir[] = "/tmp/gil-race-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char json[64];
    snprintf(json, sizeof json, "%s/t.json", dir);
    gil_t *gil = new_gil(300, NULL, NULL);
    for (int round = 0; round < 3; round++) {
        CHECK_RESULT(gil_trace_start(gil, json, "long", 0), GIL_OK);
        traffic(gil, 20000);
        struct trace_stopper s = {gil, GIL_OK, 0};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, stop_trace, &s) == 0);
        /* Until the long trace is being written: into the file itself, or
           into a temporary file beside it. */
        for (;;) {
            FILE *f = fopen(json, "rb");
            long size = f != NULL && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
            if (f != NULL) fclose(f);
            if (size > 0 || other_files_in(dir, "t.json") > 0 || atomic_load(&s.done)) break;
            sched_yield();
        }
        gil_result_t started;
        while ((started = gil_trace_start(gil, json, "short", 0)) == GIL_ERR_BUSY) sched_yield();
        CHECK_RESULT(started, GIL_OK);
        traffic(gil, 2);
        CHECK_RESULT(gil_trace_stop(gil, NULL), GIL_OK);
        pthread_join(th, NULL);
        CHECK_RESULT(s.got, GIL_OK);
        CHECK(whole_json_trace(json, "long") || whole_json_trace(json, "short"));
        CHECK(other_files_in(dir, "t.json") == 0);
    }
    CHECK_RESULT(gil_free(gil), GIL_OK);
    unlink(json);
    rmdir(dir);
}
#endif /* !_WIN32 */

#ifndef _WIN32 /* pthread_cancel */
struct cancel_tracer {
    gil_t *gil;
    const char *path;
    gil_result_t start, stop;
    atomic_int after;
};

static void *trace_with_cancel_pending(void *arg) {
    struct cancel_tracer *c = arg;
    /* Deferred (the default): pending until the next cancellation point. */
    pthread_cancel(pthread_self());
    c->start = gil_trace_start(c->gil, c->path, "cancel pending", 0); /* open() */
    traffic(c->gil, 2);
    c->stop = gil_trace_stop(c->gil, NULL); /* open(), write(), close() */
    pthread_testcancel();
    atomic_store(&c->after, 1);
    return NULL;
}

/* A thread with a pending cancel starts and stops a trace: the file I/O
   inside is no cancellation point (a forced unwind through the library
   aborts the process: "FATAL: exception not rethrown"); both calls
   succeed and the thread is cancelled at its next cancellation point. In
   a child, since the failure is an abort. */
static void test_trace_with_cancel_pending(void) {
    char dir[] = "/tmp/gil-cancel-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char json[64];
    snprintf(json, sizeof json, "%s/c.json", dir);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        gil_t *gil = new_gil(300, NULL, NULL);
        struct cancel_tracer c = {gil, json, GIL_ERR_PANIC, GIL_ERR_PANIC, 0};
        pthread_t th;
        void *ret = NULL;
        if (pthread_create(&th, NULL, trace_with_cancel_pending, &c) != 0 || pthread_join(th, &ret) != 0) _exit(2);
        if (ret != PTHREAD_CANCELED || atomic_load(&c.after)) _exit(3);
        if (c.start != GIL_OK || c.stop != GIL_OK) _exit(4);
        if (!whole_json_trace(json, "cancel pending")) _exit(5);
        _exit(gil_free(gil) == GIL_OK ? 0 : 6);
    }
    if (pid > 0) {
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "  child: %s %d\n", WIFSIGNALED(status) ? "signal" : "exit status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            checks_failed_in_test++;
        }
    }
    unlink(json);
    rmdir(dir);
}

struct cancel_calls {
    gil_result_t results[8];
    atomic_int after;
};

static void *calls_with_cancel_pending(void *arg) {
    struct cancel_calls *c = arg;
    int self_token = 0;
    gil_config_t config;
    gil_t *gil = NULL;
    gil_thread_stats_t stats;
    pthread_cancel(pthread_self()); /* deferred: pending */
    /* gil_new makes this thread's first HashMap: its keys come from
       getrandom(), a cancellation point. */
    c->results[0] = gil_config_init(&config);
    c->results[1] = gil_new(&config, &gil);
    if (c->results[1] != GIL_OK) return NULL;
    c->results[2] = gil_set_thread_stats(gil, true);
    c->results[3] = gil_acquire(gil, &self_token);
    c->results[4] = gil_name_thread(gil, &self_token, "cancel pending");
    stats.struct_size = sizeof stats;
    c->results[5] = gil_get_thread_stats(gil, &self_token, &stats);
    c->results[6] = gil_release(gil, &self_token, GIL_RELEASE_FINAL);
    c->results[7] = gil_free(gil);
    pthread_testcancel();
    atomic_store(&c->after, 1);
    return NULL;
}

/* Every call of the C ABI runs with cancellation disabled: a thread with
   a pending cancel makes a lock, uses and frees it, and is cancelled at
   its next cancellation point after the calls. In a child, since the
   failure is an abort. */
static void test_cancel_pending_across_calls(void) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct cancel_calls c;
        for (size_t i = 0; i < sizeof c.results / sizeof c.results[0]; i++) c.results[i] = GIL_ERR_PANIC;
        atomic_init(&c.after, 0);
        pthread_t th;
        void *ret = NULL;
        if (pthread_create(&th, NULL, calls_with_cancel_pending, &c) != 0 || pthread_join(th, &ret) != 0) _exit(2);
        if (ret != PTHREAD_CANCELED || atomic_load(&c.after)) _exit(3);
        for (size_t i = 0; i < sizeof c.results / sizeof c.results[0]; i++) {
            if (c.results[i] != GIL_OK) _exit(10 + (int)i);
        }
        _exit(0);
    }
    if (pid > 0) {
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "  child: %s %d\n", WIFSIGNALED(status) ? "signal" : "exit status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            checks_failed_in_test++;
        }
    }
}
#endif /* !_WIN32 */

/* ---- fork ---------------------------------------------------------------- */

static void *fork_waiter(void *arg) {
    struct waiter_arg *w = arg;
    if (gil_acquire(w->gil, w->self) != GIL_OK) abort();
    atomic_store(&w->done, 1);
    if (gil_release(w->gil, w->self, GIL_RELEASE_FINAL) != GIL_OK) abort();
    return NULL;
}

#ifndef _WIN32 /* fork */
static void test_fork_in_threaded_process(void) {
    gil_t *gil = new_gil(1000, NULL, NULL);
    struct host_thread main_t, child_t, child_worker, w_t[3];
    memset(&main_t, 0, sizeof main_t);
    CHECK_RESULT(gil_acquire(gil, &main_t), GIL_OK);
    struct waiter_arg w[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        w[i].gil = gil;
        w[i].self = &w_t[i];
        atomic_init(&w[i].done, 0);
        pthread_create(&th[i], NULL, fork_waiter, &w[i]);
    }
    while (!gil_drop_requested(gil)) sched_yield(); /* they are blocked on it */
    /* A trace running across the fork: the parent's to write. */
    char trace_path[] = "/tmp/gil-fork-trace-XXXXXX.json";
    int trace_fd = mkstemps(trace_path, 5);
    CHECK(trace_fd >= 0);
    close(trace_fd);
    CHECK_RESULT(gil_trace_start(gil, trace_path, NULL, 0), GIL_OK);

    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The child: only this thread exists. */
        int ok = gil_reinit_after_fork(gil, &child_t) == GIL_OK;
        ok = ok && gil_trace_stop(gil, NULL) == GIL_ERR_NOT_TRACING; /* dropped */
        ok = ok && gil_set_event_hook(gil, NULL, NULL) == GIL_OK;    /* the hook is free */
        void *h = NULL;
        ok = ok && gil_get_holder(gil, &h) == GIL_OK && h == &child_t;
        ok = ok && !gil_drop_requested(gil);
        ok = ok && gil_release(gil, &child_t, GIL_RELEASE_VOLUNTARY) == GIL_OK;
        /* and it works with threads again */
        struct waiter_arg cw = {gil, &child_worker, 0};
        pthread_t cth;
        ok = ok && gil_acquire(gil, &child_t) == GIL_OK;
        ok = ok && pthread_create(&cth, NULL, fork_waiter, &cw) == 0;
        while (ok && !gil_drop_requested(gil)) sched_yield();
        ok = ok && gil_release(gil, &child_t, GIL_RELEASE_FORCED) == GIL_OK;
        void *last = &child_t; /* the worker took over before that returned */
        ok = ok && gil_get_last_holder(gil, &last) == GIL_OK;
        ok = ok && (last == &child_worker || (last == NULL && atomic_load(&cw.done)));
        pthread_join(cth, NULL);
        ok = ok && atomic_load(&cw.done);
        ok = ok && gil_free(gil) == GIL_OK;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent is unaffected: still the holder, and the waiters get it. */
    void *h = NULL;
    CHECK_RESULT(gil_get_holder(gil, &h), GIL_OK);
    CHECK(h == &main_t);
    CHECK_RESULT(gil_release(gil, &main_t, GIL_RELEASE_FINAL), GIL_OK);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK(atomic_load(&w[i].done));
    }
    uint64_t events = 0;
    CHECK_RESULT(gil_trace_stop(gil, &events), GIL_OK);
    CHECK(events >= 6); /* 3 waiters: each waited, took and let go */
    char *text = read_file(trace_path);
    CHECK(text != NULL && strstr(text, "\"traceEvents\"") != NULL);
    free(text);
    unlink(trace_path);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}
#endif /* !_WIN32 */

/* ---- calls from inside the lock's own callbacks ---------------------------- */

/* What a callback's calls on its own lock returned; -1: not called. */
enum { REENTRY_CALLS = 8 };

struct reentry {
    gil_t *gil;
    struct host_thread *holder;
    atomic_int calls;     /* callbacks that ran the calls */
    int got[REENTRY_CALLS];
    char trace_path[64];
};

static void call_own_lock(struct reentry *r, void *holder) {
    int other;
    bool took = false;
    int *g = r->got;
    g[0] = gil_acquire(r->gil, &other);
    g[1] = gil_try_acquire(r->gil, &other, &took);
    g[2] = gil_release(r->gil, holder, GIL_RELEASE_VOLUNTARY);
    g[3] = gil_release(r->gil, holder, GIL_RELEASE_FORCED);
    g[4] = gil_set_event_hook(r->gil, NULL, NULL);
    g[5] = gil_trace_start(r->gil, r->trace_path, NULL, 0);
    g[6] = gil_trace_stop(r->gil, NULL);
    g[7] = gil_free(r->gil);
}

static void reentry_hook(void *user_data, const gil_event_t *event) {
    struct reentry *r = user_data;
    if (event->kind == GIL_EVENT_WAIT_START && atomic_load(&r->calls) == 0) {
        call_own_lock(r, r->holder);
        atomic_fetch_add(&r->calls, 1);
    }
}

static void reentry_drop_cb(void *user_data, void *holder) {
    struct reentry *r = user_data;
    if (atomic_load(&r->calls) == 0) {
        call_own_lock(r, holder);
        atomic_fetch_add(&r->calls, 1);
    }
}

static void check_all_reentrant(const char *preset, const char *where, struct reentry *r) {
    CHECK(atomic_load(&r->calls) == 1);
    for (int i = 0; i < REENTRY_CALLS; i++) {
        if (r->got[i] != GIL_ERR_REENTRANT) {
            fprintf(stderr, "  %s, %s: call %d gave %d (%s)\n", preset, where, i, r->got[i],
                    gil_result_str((uint32_t)r->got[i]));
            checks_failed_in_test++;
        }
    }
}

static void test_reentrant_calls(void) {
    for (size_t p = 0; gil_preset_name(p) != NULL; p++) {
        const char *preset = gil_preset_name(p);
        for (int via_hook = 0; via_hook < 2; via_hook++) {
            static struct reentry r;
            struct host_thread holder, waiter_t;
            memset(&r, 0, sizeof r);
            memset(&holder, 0, sizeof holder);
            memset(&waiter_t, 0, sizeof waiter_t);
            snprintf(r.trace_path, sizeof r.trace_path, "/tmp/gil-reentry-%d.json", (int)getpid());
            gil_config_t config;
            CHECK_RESULT(gil_config_preset(preset, &config), GIL_OK);
            config.switch_interval_us = 1000;
            if (!via_hook) {
                config.on_drop_request = reentry_drop_cb;
                config.user_data = &r;
            }
            CHECK_RESULT(gil_new(&config, &r.gil), GIL_OK);
            r.holder = &holder;
            if (via_hook) CHECK_RESULT(gil_set_event_hook(r.gil, reentry_hook, &r), GIL_OK);
            CHECK_RESULT(gil_acquire(r.gil, &holder), GIL_OK);
            struct waiter_arg w = {r.gil, &waiter_t, 0};
            pthread_t th;
            CHECK(pthread_create(&th, NULL, fork_waiter, &w) == 0);
            /* The holder runs until the callback has made its calls: from the
               waiter's hook at once, from the drop-request callback after an
               interval. It polls the flag alone meanwhile (the callback's
               release uses its token). */
            while (atomic_load(&r.calls) == 0) sched_yield();
            void *h = NULL;
            CHECK_RESULT(gil_get_holder(r.gil, &h), GIL_OK);
            CHECK(h == &holder); /* the callback's releases changed nothing */
            CHECK_RESULT(gil_release(r.gil, &holder, GIL_RELEASE_FINAL), GIL_OK);
            pthread_join(th, NULL);
            CHECK(atomic_load(&w.done));
            check_all_reentrant(preset, via_hook ? "event hook" : "drop-request callback", &r);
            if (via_hook) CHECK_RESULT(gil_set_event_hook(r.gil, NULL, NULL), GIL_OK);
            CHECK_RESULT(gil_free(r.gil), GIL_OK);
            unlink(r.trace_path);
        }
    }
    CHECK(strcmp(gil_result_str(GIL_ERR_REENTRANT), "called from inside one of the lock's own callbacks") == 0);
}

#ifndef _WIN32 /* fork and pthread_cancel */
/* ---- processes whose last thread exits: the monitor never keeps them -------- */

/* Waits up to 60 s for `pid` to end; kills it and fails if it does not. */
static void expect_exit(pid_t pid, const char *what) {
    int status = 0;
    for (int i = 0; i < 6000; i++) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "  %s: child status %d\n", what, status);
                checks_failed_in_test++;
            }
            return;
        }
        usleep(10000);
    }
    fprintf(stderr, "  %s: the child process did not end within 60 s\n", what);
    checks_failed_in_test++;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
}

/* LeakSanitizer's hook: no leak check in a child that ends with
   pthread_exit. Its parent's threads vanished in the fork, and what only
   their stacks pointed to would be reported; valgrind still checks it. */
static volatile int lsan_off;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return lsan_off; }

struct contender {
    gil_t *gil;
    atomic_int *stop;
};

/* Holds the lock and answers drop requests until told to stop. */
static void *contend_worker(void *arg) {
    struct contender *c = arg;
    if (gil_acquire(c->gil, c) != GIL_OK) abort();
    while (!atomic_load(c->stop)) {
        bool handled = false;
        if (gil_handle_drop_request(c->gil, c, &handled) != GIL_OK) abort();
    }
    if (gil_release(c->gil, c, GIL_RELEASE_FINAL) != GIL_OK) abort();
    return NULL;
}

struct forker {
    gil_t *gil;
    struct host_thread self;
    atomic_int *stop;
};

/* A non-holder thread that forks while the others contend. In the child it
   is the only thread: it takes the lock over, contends with two new threads
   (the child's first waits start a monitor there), frees the lock and ends
   with pthread_exit, so the child process ends only when every thread has:
   a monitor thread left sleeping would keep it forever. */
static void *fork_from_bystander(void *arg) {
    struct forker *f = arg;
    usleep(20000); /* let the others contend, so the parent's monitor runs */
    pid_t pid = fork();
    if (pid == 0) {
        lsan_off = 1;
        int ok = gil_reinit_after_fork(f->gil, &f->self) == GIL_OK;
        struct spinner sp[2] = {{f->gil, 3, 0}, {f->gil, 3, 0}};
        pthread_t th[2];
        ok = ok && gil_release(f->gil, &f->self, GIL_RELEASE_FINAL) == GIL_OK;
        for (int i = 0; ok && i < 2; i++) ok = pthread_create(&th[i], NULL, spin_worker, &sp[i]) == 0;
        for (int i = 0; ok && i < 2; i++) pthread_join(th[i], NULL);
        ok = ok && gil_free(f->gil) == GIL_OK;
        if (!ok) _exit(1);
        pthread_exit(NULL);
    }
    atomic_store(f->stop, 1);
    return (void *)(intptr_t)pid;
}

static void test_fork_children_end(void) {
    static const char *const presets[] = {"monitor", "priority-monitor", "priority-lazy-monitor", "priority"};
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        gil_config_t config;
        gil_t *gil = NULL;
        CHECK_RESULT(gil_config_preset(presets[p], &config), GIL_OK);
        config.switch_interval_us = 1000;
        CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
        atomic_int stop = 0;
        struct contender cs[3];
        pthread_t th[3], fth;
        struct forker f = {gil, {0, 0}, &stop};
        fflush(NULL);
        for (int i = 0; i < 3; i++) {
            cs[i].gil = gil;
            cs[i].stop = &stop;
            CHECK(pthread_create(&th[i], NULL, contend_worker, &cs[i]) == 0);
        }
        CHECK(pthread_create(&fth, NULL, fork_from_bystander, &f) == 0);
        void *ret = NULL;
        pthread_join(fth, &ret);
        pid_t pid = (pid_t)(intptr_t)ret;
        for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
        CHECK(pid > 0);
        if (pid > 0) expect_exit(pid, presets[p]);
        CHECK_RESULT(gil_free(gil), GIL_OK);
    }

    /* The same rule in a process that never forked while contending: a
       main thread that ends with pthread_exit after contention ends the
       process once the idle monitor has gone. */
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        lsan_off = 1;
        gil_config_t config;
        gil_t *gil = NULL;
        if (gil_config_preset("priority-monitor", &config) != GIL_OK) _exit(1);
        config.switch_interval_us = 1000;
        if (gil_new(&config, &gil) != GIL_OK) _exit(1);
        struct spinner sp[2] = {{gil, 3, 0}, {gil, 3, 0}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, spin_worker, &sp[i]);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        if (gil_monitor_wakeups() == 0 || gil_free(gil) != GIL_OK) _exit(1);
        pthread_exit(NULL);
    }
    if (pid > 0) expect_exit(pid, "main thread ending with pthread_exit");
}

/* ---- pthread_cancel ------------------------------------------------------ */

struct cancel_waiter {
    gil_t *gil;
    atomic_int about_to_wait;
    atomic_int acquired;
};

static void *cancel_waiter(void *arg) {
    struct cancel_waiter *w = arg;
    atomic_store(&w->about_to_wait, 1);
    if (gil_acquire(w->gil, w) != GIL_OK) return NULL;
    atomic_store(&w->acquired, 1);
    if (gil_release(w->gil, w, GIL_RELEASE_FINAL) != GIL_OK) return NULL;
    for (;;) pthread_testcancel();
}

/* A thread cancelled while it waits for the lock is not cancelled inside
   it (the condition waits are cancellation points, and a forced unwind
   through the lock aborts the process): it takes the lock when it is its
   turn and is cancelled at its next cancellation point. MicroPython's unix
   port cancels its threads this way at exit. In a child, since the failure
   is an abort. */
static void test_cancel_while_waiting(void) {
    static const char *const presets[] = {"classic", "priority", "priority-monitor"};
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            lsan_off = 1;
            gil_config_t config;
            gil_t *gil = NULL;
            int holder = 0;
            if (gil_config_preset(presets[p], &config) != GIL_OK) _exit(2);
            config.switch_interval_us = 1000;
            if (gil_new(&config, &gil) != GIL_OK || gil_acquire(gil, &holder) != GIL_OK) _exit(3);
            struct cancel_waiter w = {gil, 0, 0};
            pthread_t th;
            if (pthread_create(&th, NULL, cancel_waiter, &w) != 0) _exit(4);
            while (!atomic_load(&w.about_to_wait)) sched_yield();
            usleep(20000); /* inside gil_acquire, several timed waits in */
            if (pthread_cancel(th) != 0) _exit(5);
            usleep(20000);
            if (atomic_load(&w.acquired)) _exit(6); /* the lock is still held here */
            if (gil_release(gil, &holder, GIL_RELEASE_VOLUNTARY) != GIL_OK) _exit(7);
            void *ret = NULL;
            if (pthread_join(th, &ret) != 0) _exit(8);
            if (ret != PTHREAD_CANCELED || !atomic_load(&w.acquired)) _exit(9);
            if (gil_acquire(gil, &holder) != GIL_OK || gil_release(gil, &holder, GIL_RELEASE_FINAL) != GIL_OK)
                _exit(10);
            _exit(gil_free(gil) == GIL_OK ? 0 : 11);
        }
        if (pid > 0) expect_exit(pid, presets[p]);
    }
}

/* ---- pthread_cancel pending while the lock runs a callback ---------------- */

/* Each test: a thread with a deferred cancel pending (pthread_cancel of
   itself, which acts only at a cancellation point) enters a call on the
   lock that runs one of the host's callbacks, and the callback reaches
   cancellation points. Callbacks run with cancellation disabled: the call
   returns, and the thread is cancelled at its next cancellation point after
   it. Were the cancel acted on inside the callback, the forced unwind would
   meet the library's panic boundary and abort the process: so each test
   runs in a child. */

struct cancel_cb {
    gil_t *gil;
    pthread_t target;       /* the thread with the pending cancel */
    atomic_int reached;     /* callbacks the target ran */
    atomic_int returned;    /* the target's library calls returned */
    gil_result_t result;    /* what its call returned */
    bool yielded;
    int devnull;
};

/* Counts the call if the target runs it, then reaches cancellation points. */
static bool cancel_cb_points(struct cancel_cb *c) {
    if (!pthread_equal(pthread_self(), c->target)) return false;
    atomic_fetch_add(&c->reached, 1);
    if (write(c->devnull, "x", 1) < 0) { /* only the cancellation point matters */ }
    pthread_testcancel();
    return true;
}

static void cancel_point_hook(void *user_data, const gil_event_t *event) {
    (void)event;
    cancel_cb_points(user_data);
}

static bool cancel_point_abort(void *user_data) {
    cancel_cb_points(user_data);
    return true; /* give up */
}

static void cancel_point_drop_cb(void *user_data, void *holder) {
    (void)holder;
    cancel_cb_points(user_data);
}

/* Ends with the thread cancelled at its first cancellation point after the
   library calls; `returned` says they returned. */
static void *cancel_after(struct cancel_cb *c) {
    atomic_store(&c->returned, 1);
    pthread_testcancel();
    return NULL; /* not reached */
}

static void *cancel_in_hook(void *arg) {
    struct cancel_cb *c = arg;
    c->target = pthread_self();
    if (pthread_cancel(pthread_self()) != 0) return NULL;
    c->result = gil_acquire(c->gil, c); /* the hook sees the acquisition */
    if (c->result == GIL_OK) c->result = gil_release(c->gil, c, GIL_RELEASE_FINAL);
    return cancel_after(c);
}

static void *cancel_in_abort_check(void *arg) {
    struct cancel_cb *c = arg;
    c->target = pthread_self();
    if (pthread_cancel(pthread_self()) != 0) return NULL;
    c->result = gil_acquire_or_abort(c->gil, c, cancel_point_abort, c);
    return cancel_after(c);
}

/* A waiter that raises the drop request itself, after an interval. */
static void *cancel_in_drop_cb_waiter(void *arg) {
    struct cancel_cb *c = arg;
    c->target = pthread_self();
    if (pthread_cancel(pthread_self()) != 0) return NULL;
    c->result = gil_acquire(c->gil, c);
    if (c->result == GIL_OK) c->result = gil_release(c->gil, c, GIL_RELEASE_FINAL);
    return cancel_after(c);
}

/* The holder's side: a holder answers a drop request with
   gil_handle_drop_request, and re-acquiring, raises one on the new holder
   itself. */
static void *cancel_in_drop_cb_holder(void *arg) {
    struct cancel_cb *c = arg;
    c->target = pthread_self();
    if (gil_acquire(c->gil, c) != GIL_OK) return NULL;
    if (pthread_cancel(pthread_self()) != 0) return NULL;
    atomic_store(&c->returned, -1); /* holds, cancel pending */
    while (!gil_drop_requested(c->gil)) sched_yield();
    c->result = gil_handle_drop_request(c->gil, c, &c->yielded);
    if (c->result == GIL_OK) c->result = gil_release(c->gil, c, GIL_RELEASE_FINAL);
    return cancel_after(c);
}

/* The other thread of the holder's-side test: takes the lock from the
   target and keeps it until the target's callback has run. */
static void *cancel_drop_cb_taker(void *arg) {
    struct cancel_cb *c = arg;
    int me = 0;
    while (atomic_load(&c->returned) != -1) sched_yield();
    if (gil_acquire(c->gil, &me) != GIL_OK) return (void *)1;
    while (atomic_load(&c->reached) == 0) sched_yield();
    return gil_release(c->gil, &me, GIL_RELEASE_FINAL) == GIL_OK ? NULL : (void *)1;
}

enum cancel_kind { CANCEL_HOOK, CANCEL_ABORT_CHECK, CANCEL_DROP_CB_WAITER, CANCEL_DROP_CB_HOLDER };

/* In a child: the exit status says what went wrong (an abort if the
   cancel acted inside the callback). */
static int cancel_in_callback_child(enum cancel_kind kind) {
    struct cancel_cb c = {0};
    c.devnull = open("/dev/null", O_WRONLY);
    if (c.devnull < 0) return 2;
    gil_config_t config;
    if (gil_config_init(&config) != GIL_OK) return 3;
    config.switch_interval_us = 1000;
    if (kind == CANCEL_DROP_CB_WAITER || kind == CANCEL_DROP_CB_HOLDER) {
        config.on_drop_request = cancel_point_drop_cb;
        config.user_data = &c;
    }
    if (gil_new(&config, &c.gil) != GIL_OK) return 4;
    gil_hook_id_t hook = 0;
    if (kind == CANCEL_HOOK &&
        gil_add_event_hook(c.gil, cancel_point_hook, &c, GIL_EVENT_MASK_ACQUIRED | GIL_EVENT_MASK_RELEASED, &hook) !=
            GIL_OK)
        return 5;
    int holder = 0;
    bool hold = kind == CANCEL_ABORT_CHECK || kind == CANCEL_DROP_CB_WAITER;
    if (hold && gil_acquire(c.gil, &holder) != GIL_OK) return 6;
    void *(*body)(void *) = kind == CANCEL_HOOK           ? cancel_in_hook
                            : kind == CANCEL_ABORT_CHECK  ? cancel_in_abort_check
                            : kind == CANCEL_DROP_CB_WAITER ? cancel_in_drop_cb_waiter
                                                          : cancel_in_drop_cb_holder;
    pthread_t th, taker;
    if (pthread_create(&th, NULL, body, &c) != 0) return 7;
    if (kind == CANCEL_DROP_CB_HOLDER && pthread_create(&taker, NULL, cancel_drop_cb_taker, &c) != 0) return 8;
    if (kind == CANCEL_DROP_CB_WAITER) {
        while (atomic_load(&c.reached) == 0) sched_yield(); /* the waiter asked */
        if (gil_release(c.gil, &holder, GIL_RELEASE_VOLUNTARY) != GIL_OK) return 9;
    }
    void *ret = NULL;
    if (pthread_join(th, &ret) != 0) return 10;
    if (ret != PTHREAD_CANCELED) return 11;      /* cancelled after the call */
    if (atomic_load(&c.returned) != 1) return 12; /* ... not inside it */
    if (atomic_load(&c.reached) < 1) return 13;   /* the callback did reach a cancellation point */
    gil_result_t want = kind == CANCEL_ABORT_CHECK ? GIL_ERR_ABORTED : GIL_OK;
    if (c.result != want) return 14;
    if (kind == CANCEL_HOOK && atomic_load(&c.reached) < 2) return 15; /* acquired and released */
    if (kind == CANCEL_DROP_CB_HOLDER) {
        if (!c.yielded || pthread_join(taker, &ret) != 0 || ret != NULL) return 16;
    }
    if (kind == CANCEL_ABORT_CHECK && gil_release(c.gil, &holder, GIL_RELEASE_FINAL) != GIL_OK) return 17;
    if (kind == CANCEL_HOOK && gil_remove_event_hook(c.gil, hook) != GIL_OK) return 18;
    close(c.devnull);
    return gil_free(c.gil) == GIL_OK ? 0 : 19;
}

static void cancel_in_callback(enum cancel_kind kind, const char *what) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        lsan_off = 1;
        _exit(cancel_in_callback_child(kind));
    }
    if (pid > 0) expect_exit(pid, what);
}

static void test_cancel_in_hook(void) { cancel_in_callback(CANCEL_HOOK, "cancel pending in an event hook"); }

static void test_cancel_in_abort_check(void) {
    cancel_in_callback(CANCEL_ABORT_CHECK, "cancel pending in an abort check");
}

static void test_cancel_in_drop_cb_waiter(void) {
    cancel_in_callback(CANCEL_DROP_CB_WAITER, "cancel pending in the drop-request callback of a waiter");
}

static void test_cancel_in_drop_cb_holder(void) {
    cancel_in_callback(CANCEL_DROP_CB_HOLDER, "cancel pending in the drop-request callback of a holder");
}
#endif /* !_WIN32 */

/* ---- hook handles -------------------------------------------------------- */

static void count_event(void *user_data, const gil_event_t *event) {
    (void)event;
    atomic_fetch_add((atomic_int *)user_data, 1);
}

/* A handle is one lock's: another lock's remove does not take it. */
static void test_hook_handles_of_two_locks(void) {
    gil_t *a = new_gil(1000, NULL, NULL), *b = new_gil(1000, NULL, NULL);
    atomic_int seen_a = 0, seen_b = 0;
    gil_hook_id_t id_a = 0, id_b = 0;
    int me = 0;
    CHECK_RESULT(gil_add_event_hook(a, count_event, &seen_a, GIL_EVENT_MASK_ALL, &id_a), GIL_OK);
    CHECK_RESULT(gil_add_event_hook(b, count_event, &seen_b, GIL_EVENT_MASK_ALL, &id_b), GIL_OK);
    CHECK_RESULT(gil_remove_event_hook(b, id_a), GIL_ERR_UNKNOWN_HOOK);
    CHECK_RESULT(gil_acquire(b, &me), GIL_OK);
    CHECK_RESULT(gil_release(b, &me, GIL_RELEASE_FINAL), GIL_OK);
    CHECK(atomic_load(&seen_b) == 2); /* b's hook is still there */
    CHECK(id_a != id_b);
    CHECK_RESULT(gil_remove_event_hook(a, id_a), GIL_OK);
    CHECK_RESULT(gil_remove_event_hook(b, id_b), GIL_OK);
    CHECK_RESULT(gil_free(a), GIL_OK);
    CHECK_RESULT(gil_free(b), GIL_OK);
}

#ifndef _WIN32 /* mkstemps */
/* No handle reaches a trace's own hook: after every guess the trace still
   records. */
static void test_trace_hook_out_of_reach(void) {
    char path[] = "/tmp/gil-guess-XXXXXX.json";
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    gil_t *gil = new_gil(1000, NULL, NULL);
    atomic_int seen = 0;
    gil_hook_id_t probe = 0;
    int me = 0;
    CHECK_RESULT(gil_trace_start(gil, path, NULL, 0), GIL_OK);
    /* A later hook's handle bounds every handle given out before it. */
    CHECK_RESULT(gil_add_event_hook(gil, count_event, &seen, GIL_EVENT_MASK_ALL, &probe), GIL_OK);
    CHECK_RESULT(gil_remove_event_hook(gil, probe), GIL_OK);
    int removed = 0;
    for (gil_hook_id_t n = 1; n <= probe + 1000; n++) removed += gil_remove_event_hook(gil, n) != GIL_ERR_UNKNOWN_HOOK;
    CHECK(removed == 0);
    CHECK_RESULT(gil_set_event_hook(gil, NULL, NULL), GIL_OK);
    CHECK_RESULT(gil_acquire(gil, &me), GIL_OK);
    CHECK_RESULT(gil_release(gil, &me, GIL_RELEASE_FINAL), GIL_OK);
    uint64_t events = 0;
    CHECK_RESULT(gil_trace_stop(gil, &events), GIL_OK);
    CHECK(events == 2); /* the trace still recorded */
    CHECK_RESULT(gil_free(gil), GIL_OK);
    unlink(path);
}
#endif /* !_WIN32 */

/* ---- driver ------------------------------------------------------------- */

struct test {
    const char *name;
    void (*fn)(void);
};

/* ---- the options grammar ------------------------------------------------- */

static void test_options_text(void) {
    gil_config_t config;
    gil_options_t options;
    char err[256];
    err[0] = '\0';
    CHECK_RESULT(gil_config_parse("priority-lazy-monitor,interval_us=2000,lazy_us=30,spin_us=20,laps=3,"
                                  "stats=1,trace=gil-%p-%%.json,trace_ring=500",
                                  &config, &options, err, sizeof err),
                 GIL_OK);
    CHECK(err[0] == '\0');
    CHECK(config.struct_size == sizeof config && config.policy == GIL_POLICY_PRIORITY && config.monitor == 1);
    CHECK(config.switch_interval_us == 2000 && config.lazy_release_us == 30 && config.spin_us == 20 &&
          config.laps == 3 && config.on_drop_request == NULL);
    CHECK(options.struct_size == sizeof options && options.given == 0x7f);
    CHECK(options.stats == 1 && options.trace_ring == 500 && strcmp(options.trace, "gil-%p-%%.json") == 0);
    char path[64];
    CHECK_RESULT(gil_trace_path(options.trace, 4321, path, sizeof path), GIL_OK);
    CHECK(strcmp(path, "gil-4321-%.json") == 0);
    CHECK_RESULT(gil_trace_path("gil.txt", 1, path, sizeof path), GIL_ERR_INVALID_ARGUMENT);
    /* What it parses builds a lock. */
    gil_t *gil = NULL;
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    const char *name = NULL;
    CHECK_RESULT(gil_get_preset(gil, &name), GIL_OK);
    CHECK(name != NULL && strcmp(name, "priority-lazy-monitor") == 0);
    CHECK_RESULT(gil_free(gil), GIL_OK);

    /* Errors: a code, a message naming the text, no output written. */
    gil_config_t untouched;
    memset(&untouched, 0xab, sizeof untouched);
    CHECK_RESULT(gil_config_parse("priority,laps=99", &untouched, NULL, err, sizeof err), GIL_ERR_INVALID_CONFIG);
    CHECK(strcmp(err, "'priority,laps=99': laps must be a number from 0 to 16, not '99'") == 0);
    CHECK(untouched.struct_size == 0xabababab);
    CHECK_RESULT(gil_config_parse("fast\x01", &untouched, NULL, err, sizeof err), GIL_ERR_UNKNOWN_PRESET);
    const char *want = "'fast\\x01': unknown GIL policy 'fast\\x01' (known: classic,";
    CHECK(strncmp(err, want, strlen(want)) == 0);
    CHECK_RESULT(gil_config_parse("priority,stats=1", &untouched, NULL, err, sizeof err), GIL_ERR_INVALID_CONFIG);
    CHECK(strstr(err, "stats asks for an observer") != NULL);
    char tiny[8];
    CHECK_RESULT(gil_config_parse("priority,", &untouched, NULL, tiny, sizeof tiny), GIL_ERR_INVALID_CONFIG);
    CHECK(strcmp(tiny, "'priori") == 0);
    CHECK_RESULT(gil_config_parse(NULL, &untouched, NULL, NULL, 0), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_config_parse("priority", NULL, NULL, NULL, 0), GIL_ERR_NULL_ARGUMENT);
}

/* gil_options_start: what a host calls after gil_config_parse and gil_new. */
static void test_options_start(void) {
    char dir[] = "/tmp/gil-options-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char text[256], want[256], path[256], err[256];
    snprintf(text, sizeof text, "priority,stats=1,trace=%s/t-%%p.svg,trace_ring=100", dir);
    gil_config_t config;
    gil_options_t options;
    CHECK_RESULT(gil_config_parse(text, &config, &options, err, sizeof err), GIL_OK);
    gil_t *gil = NULL;
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    CHECK_RESULT(gil_options_start(gil, &options, "a title", 0, path, sizeof path, err, sizeof err), GIL_OK);
    snprintf(want, sizeof want, "%s/t-%ld.svg", dir, (long)getpid());
    CHECK(strcmp(path, want) == 0);
    bool on = false;
    CHECK_RESULT(gil_get_thread_stats_enabled(gil, &on), GIL_OK);
    CHECK(on);
    CHECK_RESULT(gil_acquire(gil, &on), GIL_OK);
    CHECK_RESULT(gil_release(gil, &on, GIL_RELEASE_FINAL), GIL_OK);
    CHECK_RESULT(gil_options_start(gil, &options, NULL, 0, NULL, 0, err, sizeof err), GIL_ERR_BUSY);
    uint64_t events = 0;
    CHECK_RESULT(gil_trace_stop(gil, &events), GIL_OK);
    CHECK(events == 2 && access(want, R_OK) == 0);
    CHECK(unlink(want) == 0);
    CHECK_RESULT(gil_free(gil), GIL_OK);

    /* A file it cannot create: named, with the system's reason. */
    snprintf(text, sizeof text, "classic,trace=%s/no/such/t.json", dir);
    CHECK_RESULT(gil_config_parse(text, &config, &options, err, sizeof err), GIL_OK);
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    CHECK_RESULT(gil_options_start(gil, &options, NULL, 0, path, sizeof path, err, sizeof err), GIL_ERR_IO);
#ifdef _WIN32
    /* The reason's words are the system's (Wine's differ from Windows'). */
    snprintf(want, sizeof want, "the GIL trace file '%s/no/such/t.json' cannot be created: ", dir);
#else
    snprintf(want, sizeof want, "the GIL trace file '%s/no/such/t.json' cannot be created: No such file", dir);
#endif
    CHECK(strncmp(err, want, strlen(want)) == 0 && path[0] == '\0');
    CHECK_RESULT(gil_options_start(gil, &options, NULL, 8, NULL, 0, NULL, 0), GIL_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(gil_options_start(gil, NULL, NULL, 0, NULL, 0, NULL, 0), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_free(gil), GIL_OK);
    CHECK(rmdir(dir) == 0);
}

/* ---- hosts and the settings record --------------------------------------- */

/* A lock from `text` (NULL: the host's default) parsed on `host`. */
static gil_t *lock_on_host(const char *host, const char *text) {
    gil_config_t config;
    char err[256] = "";
    gil_t *gil = NULL;
    CHECK_RESULT(gil_config_parse_host(host, text, &config, NULL, err, sizeof err), GIL_OK);
    CHECK(err[0] == '\0');
    CHECK_RESULT(gil_new(&config, &gil), GIL_OK);
    return gil;
}

/* A host's preset reports the options text it is, and that text builds
   the same lock on every host. */
static void test_host_presets(void) {
    static const struct { const char *host, *text, *printed; } cases[] = {
        {"cpython", "priority", "priority,spin_us=50"},
        {"ocaml", "classic", "classic,interval_us=50000"},
        {"ocaml", NULL, "priority,spin_us=200"},
        {"ruby", "priority-lazy,lazy_us=30", "priority-lazy,lazy_us=30,spin_us=200"},
        {"ruby", "classic,interval_us=700", "classic,interval_us=700"},
        {"micropython", "priority", "priority,spin_us=0"},
        {"generic", NULL, "classic,interval_us=5000"},
    };
    size_t hosts = 0;
    while (gil_host_name(hosts) != NULL) hosts++;
    CHECK(hosts == 5 && strcmp(gil_host_name(1), "cpython") == 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gil_t *gil = lock_on_host(cases[i].host, cases[i].text);
        gil_settings_t s = {.struct_size = sizeof s};
        CHECK_RESULT(gil_get_settings(gil, &s), GIL_OK);
        if (strcmp(s.options, cases[i].printed) != 0) {
            fprintf(stderr, "  %s on %s printed '%s', want '%s'\n", cases[i].text ? cases[i].text : "(default)",
                    cases[i].host, s.options, cases[i].printed);
            CHECK(!"the printed text");
        }
        for (size_t h = 0; h < hosts; h++) {
            gil_t *again = lock_on_host(gil_host_name(h), s.options);
            gil_settings_t t = {.struct_size = sizeof t};
            CHECK_RESULT(gil_get_settings(again, &t), GIL_OK);
            CHECK(strcmp(t.options, s.options) == 0 && t.spin_us == s.spin_us &&
                  t.switch_interval_us == s.switch_interval_us);
            CHECK_RESULT(gil_free(again), GIL_OK);
        }
        CHECK_RESULT(gil_free(gil), GIL_OK);
    }
    /* An unknown host: its own code, a message naming it, nothing written. */
    gil_config_t untouched;
    char err[256];
    memset(&untouched, 0xab, sizeof untouched);
    CHECK_RESULT(gil_config_parse_host("jython", "priority", &untouched, NULL, err, sizeof err),
                 GIL_ERR_UNKNOWN_HOST);
    CHECK(strcmp(err, "unknown GIL host 'jython' (known: generic, cpython, micropython, ocaml, ruby)") == 0);
    CHECK(untouched.struct_size == 0xabababab);
    CHECK_RESULT(gil_config_parse_host("ocaml", "priority,spin_us=x", &untouched, NULL, err, sizeof err),
                 GIL_ERR_INVALID_CONFIG);
    CHECK(strstr(err, "spin_us must be a number") != NULL);
    CHECK_RESULT(gil_config_parse_host(NULL, "priority", &untouched, NULL, err, sizeof err), GIL_ERR_NULL_ARGUMENT);
    CHECK(untouched.struct_size == 0xabababab);
}

/* gil_get_settings: the record says what the single getters say, and a
   struct_size it cannot fill is refused without a write. */
static void test_settings_record(void) {
    gil_t *gil = lock_on_host("cpython", "priority-lazy-monitor,lazy_us=70,laps=3");
    CHECK_RESULT(gil_set_switch_interval(gil, 1234), GIL_OK);
    gil_settings_t s;
    memset(&s, 0xcd, sizeof s);
    s.struct_size = sizeof s;
    CHECK_RESULT(gil_get_settings(gil, &s), GIL_OK);
    gil_policy_t policy;
    uint64_t interval, lazy, spin;
    uint32_t laps;
    bool monitor;
    const char *preset;
    CHECK_RESULT(gil_get_policy(gil, &policy), GIL_OK);
    CHECK_RESULT(gil_get_switch_interval(gil, &interval), GIL_OK);
    CHECK_RESULT(gil_get_lazy_release(gil, &lazy), GIL_OK);
    CHECK_RESULT(gil_get_spin(gil, &spin), GIL_OK);
    CHECK_RESULT(gil_get_laps(gil, &laps), GIL_OK);
    CHECK_RESULT(gil_get_monitor(gil, &monitor), GIL_OK);
    CHECK_RESULT(gil_get_preset(gil, &preset), GIL_OK);
    CHECK(s.struct_size == sizeof s && s.policy == policy && s.switch_interval_us == interval &&
          s.lazy_release_us == lazy && s.spin_us == spin && s.laps == laps && s.monitor == monitor &&
          s.preset == preset);
    CHECK(interval == 1234 && lazy == 70 && spin == 50 && laps == 3 && monitor);
    CHECK(strcmp(s.options, "priority-lazy-monitor,interval_us=1234,lazy_us=70,spin_us=50,laps=3") == 0);

    /* Every number setting by its key: the record's value of each known
       one, and no key listed twice. */
    size_t keys = 0;
    for (const char *key; (key = gil_setting_key(keys)) != NULL; keys++) {
        uint64_t value = 0xcdcd;
        CHECK_RESULT(gil_get_setting(gil, key, &value), GIL_OK);
        for (size_t j = 0; j < keys; j++) CHECK(strcmp(gil_setting_key(j), key) != 0);
        if (strcmp(key, "interval_us") == 0) CHECK(value == s.switch_interval_us);
        else if (strcmp(key, "lazy_us") == 0) CHECK(value == s.lazy_release_us);
        else if (strcmp(key, "spin_us") == 0) CHECK(value == s.spin_us);
        else if (strcmp(key, "laps") == 0) CHECK(value == s.laps);
    }
    CHECK(keys >= 4);
    uint64_t untouched = 7;
    CHECK_RESULT(gil_get_setting(gil, "policy", &untouched), GIL_ERR_UNKNOWN_SETTING);
    CHECK_RESULT(gil_get_setting(gil, NULL, &untouched), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_get_setting(gil, "laps", NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK(untouched == 7);

    static const uint32_t bad[] = {0, 4, sizeof(gil_settings_t) - 1, sizeof(gil_settings_t) + 8};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gil_settings_t t;
        memset(&t, 0xcd, sizeof t);
        t.struct_size = bad[i];
        CHECK_RESULT(gil_get_settings(gil, &t), GIL_ERR_STRUCT_SIZE);
        CHECK(t.struct_size == bad[i] && t.laps == 0xcdcdcdcdu);
    }
    CHECK(strcmp(gil_result_str(GIL_ERR_STRUCT_SIZE), gil_result_str(GIL_ERR_INVALID_ARGUMENT)) != 0);
    CHECK_RESULT(gil_get_settings(gil, NULL), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_get_settings(NULL, &s), GIL_ERR_NULL_ARGUMENT);
    CHECK_RESULT(gil_free(gil), GIL_OK);
}

/* With arguments, runs only the tests so named (for looping one test). */
static bool selected(int argc, char **argv, const char *name) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return true;
    return false;
}

int main(int argc, char **argv) {
    static const struct test tests[] = {
        {"mutual_exclusion", test_mutual_exclusion},
        {"drop_request_through_callback", test_drop_request_through_callback},
        {"drop_request_through_flag", test_drop_request_through_flag},
        {"forced_switch", test_forced_switch},
        {"misuse_codes", test_misuse_codes},
        {"presets_and_policies", test_presets_and_policies},
        {"monitor_events_histograms", test_monitor_events_histograms},
        {"traces", test_traces},
        {"several_hooks", test_several_hooks},
        {"thread_stats", test_thread_stats},
        {"ring_trace", test_ring_trace},
        {"name_by_tag", test_name_by_tag},
        {"trace_same_path_twice", test_trace_same_path_twice},
        {"non_ascii_trace_name", test_non_ascii_trace_name},
#ifndef _WIN32
        {"trace_start_while_stop_writes", test_trace_start_while_stop_writes},
#endif
#ifndef _WIN32
        {"trace_with_cancel_pending", test_trace_with_cancel_pending},
#endif
#ifndef _WIN32
        {"cancel_pending_across_calls", test_cancel_pending_across_calls},
#endif
        {"names_make_no_records", test_names_make_no_records},
        {"holder_tags_itself", test_holder_tags_itself},
        {"foreign_tag_refused", test_foreign_tag_refused},
#ifndef _WIN32
        {"cancel_in_foreach_callback", test_cancel_in_foreach_callback},
#endif
#ifndef _WIN32
        {"fork_in_threaded_process", test_fork_in_threaded_process},
#endif
        {"reentrant_calls", test_reentrant_calls},
#ifndef _WIN32
        {"fork_children_end", test_fork_children_end},
#endif
#ifndef _WIN32
        {"cancel_while_waiting", test_cancel_while_waiting},
#endif
#ifndef _WIN32
        {"cancel_in_hook", test_cancel_in_hook},
#endif
#ifndef _WIN32
        {"cancel_in_abort_check", test_cancel_in_abort_check},
#endif
#ifndef _WIN32
        {"cancel_in_drop_cb_waiter", test_cancel_in_drop_cb_waiter},
#endif
#ifndef _WIN32
        {"cancel_in_drop_cb_holder", test_cancel_in_drop_cb_holder},
#endif
        {"hook_handles_of_two_locks", test_hook_handles_of_two_locks},
#ifndef _WIN32
        {"trace_hook_out_of_reach", test_trace_hook_out_of_reach},
#endif
        {"options_text", test_options_text},
        {"options_start", test_options_start},
        {"host_presets", test_host_presets},
        {"settings_record", test_settings_record},
    };
    int passed = 0;
    start_watchdog();
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (!selected(argc, argv, tests[i].name)) continue;
        checks_failed_in_test = 0;
        watch(tests[i].name);
        tests[i].fn();
        watch(NULL);
        printf("test %s ... %s\n", tests[i].name, checks_failed_in_test ? "FAILED" : "ok");
        fflush(stdout);
        if (checks_failed_in_test)
            failures++;
        else
            passed++;
    }
    printf("%d passed, %d failed\n", passed, failures);
    if (passed + failures == 0) {
        fprintf(stderr, "no test is named %s\n", argv[1]);
        return 2;
    }
    return failures ? 1 : 0;
}
