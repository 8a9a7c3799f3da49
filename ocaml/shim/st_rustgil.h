/*
 * otherlibs/systhreads/st_rustgil.h: OCaml 5's systhreads master lock,
 * routed to the rust-gil library (gil.h). Included by st_pthreads.h in
 * place of its own master lock when built with -DCAML_RUST_GIL.
 *
 * Maintained in the rust-gil repository (ocaml/shim/); the OCaml patch
 * carries it as a new file (ocaml/build.sh puts it in).
 *
 * The mapping:
 *   - one gil_t per domain slot (as upstream has one master lock per
 *     domain); the domain lock is still taken after the gil and released
 *     before it, so the backup thread works as before;
 *   - the token is the address of a thread-local byte: it exists before a
 *     C thread registering with the runtime has a thread record;
 *   - release reasons: a blocking section is voluntary, a yield forced, a
 *     thread's end final;
 *   - no tick thread: a waiter asks the holder to drop after the switch
 *     interval (or at once, with the priority policy, if the holder is
 *     CPU-bound and the waiter not), through the library's drop-request
 *     callback, which does what the tick thread did: it sets the domain's
 *     requested_external_interrupt and young_limit, so the holder answers
 *     at its next poll (caml_thread_interrupt_hook, thread_yield);
 *   - the policy is a library preset with options, from OCAML_RUST_GIL,
 *     parsed by the library for the host "ocaml" (gil_config_parse_host):
 *     unset or empty, the library's default for OCaml (priority); a
 *     preset's name stands for OCaml's default for it, which the library
 *     keeps (classic keeps OCaml's 50 ms tick, the priority presets spin
 *     200 us; ocaml/README.md says why), and options given win over it.
 *     The shim sets no value itself. Reports (the trace's title, stats=1)
 *     print the options text the lock is (gil_get_settings), which builds
 *     the same lock on every host. A bad value ends start-up naming it
 *     (exit status 2).
 */

#include <gil.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <unistd.h>

#include "caml/version.h"

/* The host whose defaults the library applies, and where its options
   come from. */
#define ST_RUSTGIL_HOST "ocaml"
#define ST_RUSTGIL_ENV "OCAML_RUST_GIL"

typedef struct {
  int init;                       /* 0 after a fork: the lock is the parent's */
  gil_t *gil;                     /* this domain's lock, NULL before the first */
  atomic_uintnat waiters;         /* threads waiting for the lock (or yielding) */
  caml_domain_state *dom_st;      /* the domain the drop requests interrupt */
} st_masterlock;

/* This thread's token. */
static __thread char st_rustgil_token_byte;
#define St_rustgil_token ((void *) &st_rustgil_token_byte)

static void st_bt_lock_acquire(st_masterlock *m);
static void st_bt_lock_release(st_masterlock *m);

static void st_rustgil_check(gil_result_t r, const char *what)
{
  if (r != GIL_OK)
    caml_fatal_error("rust-gil: %s: %s", what, gil_result_str(r));
}

/* The library's drop-request callback: runs on a waiter, under the lock's
   mutex, while the holder holds it. Both stores are the runtime's own way
   to interrupt a domain from another thread (domain_state.tbl); the waiter
   has no Caml_state, so caml_interrupt_self cannot be used. */
static void st_rustgil_drop_request(void *user_data, void *holder)
{
  caml_domain_state *d = ((st_masterlock *) user_data)->dom_st;
  (void) holder;
  atomic_store_release(&d->requested_external_interrupt, 1);
  atomic_store_release(&d->young_limit, CAML_UINTNAT_MAX);
}

/* OCAML_RUST_GIL, read once for the process: the configuration and the
   observers it asks for; the value as given, NULL if unset or empty. */
static gil_config_t st_rustgil_config;
static gil_options_t st_rustgil_options;
static const char *st_rustgil_value;
static char st_rustgil_trace_path[GIL_TRACE_PATH_MAX + 64];
static gil_t *st_rustgil_traced;

static void st_rustgil_read_config(void)
{
  static int read = 0;
  char why[768];
  if (read) return;
  read = 1;
  st_rustgil_value = getenv(ST_RUSTGIL_ENV);
  if (st_rustgil_value != NULL && st_rustgil_value[0] == '\0')
    st_rustgil_value = NULL;
  if (gil_config_parse_host(ST_RUSTGIL_HOST, st_rustgil_value, &st_rustgil_config,
                            &st_rustgil_options, why, sizeof why) != GIL_OK) {
    /* The library's message names the value, escaped, and the fault. */
    fprintf(stderr, "ocaml: %s=%s\n", ST_RUSTGIL_ENV, why);
    exit(2);
  }
}

/* The options text `g` is (gil_get_settings): what reports print. */
static const char *st_rustgil_options_text(gil_t *g, gil_settings_t *s)
{
  s->struct_size = sizeof *s;
  st_rustgil_check(gil_get_settings(g, s), "gil_get_settings");
  return s->options[0] != '\0' ? s->options : "?";
}

static void st_rustgil_write_trace(void)
{
  gil_result_t r = gil_trace_stop(st_rustgil_traced, NULL);
  if (r != GIL_OK && r != GIL_ERR_NOT_TRACING)
    fprintf(stderr, "ocaml: rust-gil: the GIL trace could not be written to '%s': %s\n",
            st_rustgil_trace_path, gil_result_str(r));
}

/* stats=1: what the lock saw, written to stderr at exit, since an OCaml
   program has no module to read it with: a row per thread (in the order
   they began; times in ms), the lock's counters, and the quantiles of its
   waits and holds. Only the process that started: a fork child inherits
   the handler, not the report. */
static gil_t *st_rustgil_counted;
static pid_t st_rustgil_counted_pid;

static int32_t st_rustgil_report_thread(void *user_data, const gil_thread_stats_t *s)
{
  unsigned *row = user_data;
  fprintf(stderr, "%7u %5u %12llu %8llu %10.1f %10.1f %10.1f %7llu %7llu %9llu\n",
          ++*row, s->alive, (unsigned long long) s->acquisitions,
          (unsigned long long) s->waits, s->wait_ns / 1e6, s->hold_ns / 1e6,
          s->call_ns / 1e6, (unsigned long long) s->forced_releases,
          (unsigned long long) s->drop_requests_raised,
          (unsigned long long) s->drop_requests_received);
  return 0;
}

/* The top of the fine bucket (gil.h) holding quantile q, in microseconds. */
static double st_rustgil_quantile_us(const uint64_t *fine, double q)
{
  uint64_t total = 0, seen = 0;
  for (int i = 0; i < GIL_HISTOGRAM_FINE_BUCKETS; i++) total += fine[i];
  if (total == 0) return 0;
  for (int i = 0; i < GIL_HISTOGRAM_FINE_BUCKETS; i++) {
    seen += fine[i];
    if (seen >= q * total) {
      if (i < 8) return (i + 1) / 1e3;
      int p = 3 + (i - 8) / 8, k = (i - 8) % 8;
      return (double) (9 + k) * (double) (1ULL << (p - 3)) / 1e3;
    }
  }
  return 0;
}

static void st_rustgil_report(void)
{
  gil_t *g = st_rustgil_counted;
  gil_counters_t c = { .struct_size = sizeof c };
  gil_settings_t s;
  gil_histograms_t *h;
  unsigned row = 0;
  if (getpid() != st_rustgil_counted_pid || (h = calloc(1, sizeof *h)) == NULL) return;
  h->struct_size = sizeof *h;
  const char *options = st_rustgil_options_text(g, &s);
  fprintf(stderr, "ocaml: rust-gil stats, pid %ld, %s=%s, GIL options %s, switch interval %llu us\n"
          " thread alive acquisitions    waits    wait ms    hold ms    call ms  forced  raised  received\n",
          (long) getpid(), ST_RUSTGIL_ENV, st_rustgil_value != NULL ? st_rustgil_value : "(unset)",
          options, (unsigned long long) s.switch_interval_us);
  (void) gil_foreach_thread_stats(g, st_rustgil_report_thread, &row);
  if (gil_get_counters(g, &c) == GIL_OK)
    fprintf(stderr, " lock: %llu acquisitions, %llu switches, %llu drop requests, "
            "%llu forced switches, %llu preemptions, %llu starvation promotions; "
            "spin %llu us, %llu CPU spin takes\n",
            (unsigned long long) c.acquisitions, (unsigned long long) c.switches,
            (unsigned long long) c.drop_requests, (unsigned long long) c.forced_switches,
            (unsigned long long) c.preemptions, (unsigned long long) c.starvation_promotions,
            (unsigned long long) s.spin_us, (unsigned long long) c.cpu_spin_takes);
  if (gil_get_histograms(g, h) == GIL_OK)
    fprintf(stderr, " waits (us): p50 %.1f, p99 %.1f, p99.9 %.1f, max %.1f;"
            " holds (us): p50 %.1f, p99 %.1f, max %.1f\n",
            st_rustgil_quantile_us(h->wait_fine, 0.5), st_rustgil_quantile_us(h->wait_fine, 0.99),
            st_rustgil_quantile_us(h->wait_fine, 0.999), st_rustgil_quantile_us(h->wait_fine, 1.0),
            st_rustgil_quantile_us(h->hold_fine, 0.5), st_rustgil_quantile_us(h->hold_fine, 0.99),
            st_rustgil_quantile_us(h->hold_fine, 1.0));
  free(h);
}

/* The observers OCAML_RUST_GIL asks for (stats=, trace=), on domain 0's
   lock; in a fork child a trace starts only if its name has %p. */
static void st_rustgil_start_observers(gil_t *g, int child)
{
  static int registered = 0;
  char title[GIL_OPTIONS_TEXT_MAX + 128], why[GIL_TRACE_PATH_MAX + 256];
  gil_settings_t s;
  snprintf(title, sizeof title, "OCaml %s, GIL options %s, pid %ld",
           OCAML_VERSION_STRING, st_rustgil_options_text(g, &s), (long) getpid());
  if (gil_options_start(g, &st_rustgil_options, title,
                        child ? GIL_OPTIONS_FORK_CHILD : 0,
                        st_rustgil_trace_path, sizeof st_rustgil_trace_path,
                        why, sizeof why) != GIL_OK) {
    /* Only a value asks for observers: the default starts none. */
    fprintf(stderr, "ocaml: %s='%s': %s\n", ST_RUSTGIL_ENV,
            st_rustgil_value != NULL ? st_rustgil_value : "", why);
    if (!child) exit(2);
    return;
  }
  if (st_rustgil_options.stats && !child) {
    st_rustgil_check(gil_set_histograms(g, true), "gil_set_histograms");
    st_rustgil_counted = g;
    st_rustgil_counted_pid = getpid();
    atexit(st_rustgil_report);
  }
  if (st_rustgil_trace_path[0] == '\0') return;
  st_rustgil_traced = g;
  if (!registered) {
    registered = 1;
    atexit(st_rustgil_write_trace);
  }
}

/* Makes the domain's lock, held by the calling thread (the domain's first
   thread, or after a fork the forking thread), as upstream's busy = 1.
   A failure of the library ends the program with its message. */
static int st_masterlock_init(st_masterlock *m)
{
  m->dom_st = Caml_state;
  atomic_store_release(&m->waiters, 0);
  if (m->gil != NULL && !m->init) {
    /* In a fork child: fresh, and held by the forking thread. */
    st_rustgil_check(gil_reinit_after_fork(m->gil, St_rustgil_token),
                     "gil_reinit_after_fork");
    m->init = 1;
    if (Caml_state->id == 0) st_rustgil_start_observers(m->gil, 1);
    return 0;
  }
  if (m->gil != NULL) {
    /* A new domain on the slot of one that ended holding the slot's lock
       (its threads all joined; the last of them may still be returning
       from its final release, so the lock is kept, never freed): let go
       on the ended thread's behalf, and take it for this one. */
    void *holder = NULL;
    if (gil_get_holder(m->gil, &holder) == GIL_OK && holder != NULL)
      st_rustgil_check(gil_release(m->gil, holder, GIL_RELEASE_FINAL), "gil_release");
  } else {
    st_rustgil_read_config();
    gil_config_t config = st_rustgil_config;
    config.on_drop_request = st_rustgil_drop_request;
    config.user_data = m;
    st_rustgil_check(gil_new(&config, &m->gil), "gil_new");
  }
  st_rustgil_check(gil_acquire(m->gil, St_rustgil_token), "gil_acquire");
  m->init = 1;
  if (Caml_state->id == 0) st_rustgil_start_observers(m->gil, 0);
  return 0;
}

static uintnat st_masterlock_waiters(st_masterlock *m)
{
  return atomic_load_acquire(&m->waiters);
}

/* Whether a waiter asked the holder to drop (the interrupt it answers may
   be stale: raised for an earlier holder). */
static int st_masterlock_drop_requested(st_masterlock *m)
{
  return gil_drop_requested(m->gil);
}

static void st_masterlock_acquire(st_masterlock *m)
{
  bool took = false;
  /* Counted before trying, so that a Thread.yield in between sees this
     thread coming (upstream counts it under the master lock's mutex). */
  atomic_fetch_add(&m->waiters, +1);
  st_rustgil_check(gil_try_acquire(m->gil, St_rustgil_token, &took), "gil_try_acquire");
  if (!took)
    st_rustgil_check(gil_acquire(m->gil, St_rustgil_token), "gil_acquire");
  atomic_fetch_add(&m->waiters, -1);
  st_bt_lock_acquire(m);
}

static void st_masterlock_release_for(st_masterlock *m, gil_release_reason_t why)
{
  st_bt_lock_release(m);
  st_rustgil_check(gil_release(m->gil, St_rustgil_token, why), "gil_release");
}

/* Around a blocking section. */
static void st_masterlock_release(st_masterlock *m)
{
  st_masterlock_release_for(m, GIL_RELEASE_VOLUNTARY);
}

/* A thread's last release (it leaves the runtime). */
static void st_masterlock_release_final(st_masterlock *m)
{
  st_masterlock_release_for(m, GIL_RELEASE_FINAL);
}

/* Hands the lock to a waiter and waits for it again, so the yielder
   cannot take straight back what it gave up. Counted as a waiter
   meanwhile, so that the new holder's Thread.yield sees it. */
Caml_inline void st_thread_yield(st_masterlock *m)
{
  void *last = NULL;
  if (st_masterlock_waiters(m) == 0) return;
  atomic_fetch_add(&m->waiters, +1);
  /* As upstream: no backup-thread messaging, a thread resumes at once. */
  caml_release_domain_lock();
  /* Returns once another thread has the lock, if one is in its line. */
  st_rustgil_check(gil_release(m->gil, St_rustgil_token, GIL_RELEASE_FORCED), "gil_release");
  /* A waiter counted above may not be in the lock's line yet (back from
     its own yield, it may still be waiting for a CPU): then the release
     did not wait for it. It is on its way to take the lock; let it. */
  while (atomic_load_acquire(&m->waiters) > 1
         && gil_get_last_holder(m->gil, &last) == GIL_OK && last == St_rustgil_token)
    sched_yield();
  st_rustgil_check(gil_acquire(m->gil, St_rustgil_token), "gil_acquire");
  atomic_fetch_add(&m->waiters, -1);
  caml_acquire_domain_lock();
}
