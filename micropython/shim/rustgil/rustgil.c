/*
 * MicroPython's GIL on the rust-gil library: the functions behind
 * MP_THREAD_GIL_ENTER / _EXIT / _EXIT_FINAL / _BOUNCE / _INIT when the
 * build sets MICROPY_PY_THREAD_GIL_EXTERNAL (py/mpthread.h, as patched by
 * micropython/patches/), and the `rustgil` module.
 *
 * The mapping (the new-GIL protocol, as CPython 3.2+ has it):
 *
 *   MP_THREAD_GIL_ENTER       gil_acquire; a waiter that waits a switch
 *                             interval raises a drop request on the holder
 *   MP_THREAD_GIL_EXIT        gil_release(VOLUNTARY): around a call that may
 *                             block (socket, select/poll, time.sleep, ...)
 *   MP_THREAD_GIL_BOUNCE      the VM's periodic point (every
 *                             MICROPY_PY_THREAD_GIL_VM_DIVISOR jumps):
 *                             one relaxed load; only if a drop was requested,
 *                             gil_release(FORCED) then gil_acquire
 *   MP_THREAD_GIL_EXIT_FINAL  gil_release(FINAL): a thread's last release
 *
 * The stock design instead unlocks and re-locks a mutex at every periodic
 * point, whether or not anyone waits.
 *
 * A thread is named to the lock by its mp_state_thread_t (mp_thread_get_state()):
 * one per MicroPython thread, alive from before its first ENTER until after
 * its final release; the lock never dereferences it.
 *
 * The policy is read once, when mp_init() creates the lock, from the
 * environment variable MICROPY_RUST_GIL, in the library's grammar, parsed
 * for the host "micropython" (gil_config_parse_host): a preset (classic,
 * priority, lazy, priority-lazy, monitor, priority-monitor,
 * priority-lazy-monitor), then options, e.g.
 * priority,interval_us=2000,laps=3,stats=1,trace=gil-%p.svg; unset or
 * empty means the library's default for MicroPython (priority), whose
 * presets are the library's own. A trace is written at exit, titled with
 * the options text the lock is. A bad value stops start-up with the
 * library's sentence naming it, and exit status 1.
 *
 * The module:
 *   rustgil.policy()            the preset in force (a str)
 *   rustgil.options()           the options text the lock is (a str), e.g.
 *                               priority,spin_us=0: it builds the same lock
 *                               on every host
 *   rustgil.presets()           the names MICROPY_RUST_GIL accepts (a tuple)
 *   rustgil.counters()          the lock's counters (a dict of ints)
 *   rustgil.switch_interval([us])  the switch interval in microseconds; with
 *                               an argument, sets it (ValueError if refused)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gil.h>

#include "py/mpthread.h"
#include "py/obj.h"
#include "py/objtuple.h"
#include "py/runtime.h"
#include "genhdr/mpversion.h"

#if !MICROPY_PY_THREAD || !MICROPY_PY_THREAD_GIL || !MICROPY_PY_THREAD_GIL_EXTERNAL
#error "rustgil needs MICROPY_PY_THREAD=1, MICROPY_PY_THREAD_GIL=1 and MICROPY_PY_THREAD_GIL_EXTERNAL=1"
#endif

#define RUSTGIL_HOST "micropython"
#define RUSTGIL_ENV "MICROPY_RUST_GIL"

/* The one lock of this process: created by mp_thread_gil_init (mp_init, on
   the main thread, before any other thread exists) and never freed, since
   threads cancelled at exit may still be inside a call on it. */
static gil_t *rustgil_lock;

/* A failed call on the lock is a broken invariant of the VM (a release by a
   thread that does not hold it, ...), not an error Python code can handle:
   say which call and stop, as MicroPython's own fatal errors do. */
static void rustgil_fatal(const char *call, gil_result_t r) {
    fprintf(stderr, "micropython: rust-gil: %s failed: %s\n", call, gil_result_str(r));
    abort();
}

/* MicroPython's unix port makes its threads asynchronously cancellable
   (mp_thread_start) and cancels the others at exit (mp_thread_deinit),
   holding the GIL, while they wait for it or block outside the VM. A
   cancel acted on inside the library would unwind through Rust frames,
   which aborts the process ("FATAL: exception not rethrown").

   Deferred cancellation around each lock call is not enough: glibc before
   2.41 acts on a cancel signal sent while the thread was asynchronous when
   the signal arrives later, inside a cancellable system call, even with
   cancellation disabled; the library's wait for the lock is one. So from
   its first call on the lock a thread stays deferred, and the shim acts on
   a pending cancel itself, in C, after each call (pthread_testcancel).
   Asynchronous again after a call, a thread could receive the signal
   between two calls and carry it into the next wait.

   What this changes for MicroPython: a thread can only be cancelled while
   it does not hold the GIL (the canceller holds it), and then it dies at
   its next cancellation point (a read, a sleep, a poll) or when it next
   takes the lock, not at once. A thread cancelled with the lock just taken
   gives it back first (the cleanup handler, a final release), so a thread
   that still runs (the exiting main thread, an embedder's) can take it
   again. The VM's drop-request poll needs none of this: only the GIL's
   holder runs it. */
static void rustgil_defer_cancel(void) {
    #ifndef __ANDROID__
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
    #endif
}

static void rustgil_release_on_cancel(void *token) {
    /* Final: never waits, whatever drop request is pending. */
    (void)gil_release(rustgil_lock, token, GIL_RELEASE_FINAL);
}

/* Acts on a pending cancel, after a lock call; holding says whether this
   thread now holds the lock (then it releases it first). */
static void rustgil_act_on_cancel(int holding) {
    #ifndef __ANDROID__
    if (holding) {
        pthread_cleanup_push(rustgil_release_on_cancel, mp_thread_get_state());
        pthread_testcancel();
        pthread_cleanup_pop(0);
    } else {
        pthread_testcancel();
    }
    #else
    (void)holding;
    #endif
}

static void *rustgil_token(void) {
    return mp_thread_get_state();
}

/* The trace MICROPY_RUST_GIL started (trace=PATH), for the message if it
   cannot be written at exit. */
static char rustgil_trace_path[GIL_TRACE_PATH_MAX + 64];

static void rustgil_write_trace(void) {
    gil_result_t r = gil_trace_stop(rustgil_lock, NULL);
    if (r != GIL_OK && r != GIL_ERR_NOT_TRACING) {
        fprintf(stderr, "micropython: rust-gil: the GIL trace could not be written to '%s': %s\n",
            rustgil_trace_path, gil_result_str(r));
    }
}

/* Starts the observers the options ask for (the library's
   gil_options_start); a trace that cannot start stops start-up, naming
   the file. */
static void rustgil_start_observers(const gil_options_t *o, const char *value) {
    char title[GIL_OPTIONS_TEXT_MAX + 160];
    gil_settings_t s = { .struct_size = sizeof s };
    gil_result_t r = gil_get_settings(rustgil_lock, &s);
    if (r != GIL_OK) {
        rustgil_fatal("gil_get_settings", r);
    }
    snprintf(title, sizeof title, "MicroPython %s, GIL options %s, pid %ld", MICROPY_VERSION_STRING,
        s.options[0] != '\0' ? s.options : "?", (long)getpid());
    char why[GIL_TRACE_PATH_MAX + 256];
    if (gil_options_start(rustgil_lock, o, title, 0, rustgil_trace_path, sizeof rustgil_trace_path,
        why, sizeof why) != GIL_OK) {
        /* Only a value asks for observers: the default starts none. */
        fprintf(stderr, "micropython: %s='%s': %s\n", RUSTGIL_ENV, value != NULL ? value : "", why);
        exit(1);
    }
    if (rustgil_trace_path[0] != '\0') {
        atexit(rustgil_write_trace);
    }
}

void mp_thread_gil_init(void) {
    if (rustgil_lock != NULL) {
        /* mp_init after an mp_deinit in the same process: the lock stays. */
        return;
    }
    const char *value = getenv(RUSTGIL_ENV);
    if (value != NULL && value[0] == '\0') {
        value = NULL;  /* the library's default for this host */
    }
    gil_config_t config;
    gil_options_t options;
    char why[768];
    if (gil_config_parse_host(RUSTGIL_HOST, value, &config, &options, why, sizeof why) != GIL_OK) {
        /* The library's message names the value, escaped, and the fault. */
        fprintf(stderr, "micropython: %s=%s\n", RUSTGIL_ENV, why);
        exit(1);
    }
    gil_result_t r = gil_new(&config, &rustgil_lock);
    if (r != GIL_OK) {
        rustgil_fatal("gil_new", r);
    }
    rustgil_start_observers(&options, value);
}

void mp_thread_gil_enter(void) {
    /* Callers read errno after re-entering (MP_HAL_RETRY_SYSCALL). */
    int saved = errno;
    rustgil_defer_cancel();
    gil_result_t r = gil_acquire(rustgil_lock, rustgil_token());
    if (r != GIL_OK) {
        rustgil_fatal("gil_acquire", r);
    }
    errno = saved;
    rustgil_act_on_cancel(1);
}

static void rustgil_release(gil_release_reason_t reason) {
    int saved = errno;
    rustgil_defer_cancel();
    gil_result_t r = gil_release(rustgil_lock, rustgil_token(), reason);
    if (r != GIL_OK) {
        rustgil_fatal("gil_release", r);
    }
    errno = saved;
    rustgil_act_on_cancel(0);
}

void mp_thread_gil_exit(void) {
    rustgil_release(GIL_RELEASE_VOLUNTARY);
}

void mp_thread_gil_exit_final(void) {
    rustgil_release(GIL_RELEASE_FINAL);
}

void mp_thread_gil_bounce(void) {
    /* The common case, nobody waiting: one relaxed load, no lock traffic. */
    if (!gil_drop_requested(rustgil_lock)) {
        return;
    }
    rustgil_defer_cancel();
    gil_result_t r = gil_handle_drop_request(rustgil_lock, rustgil_token(), NULL);
    if (r != GIL_OK) {
        rustgil_fatal("gil_handle_drop_request", r);
    }
    rustgil_act_on_cancel(1);
}

/* ---- the rustgil module --------------------------------------------------- */

static mp_obj_t rustgil_policy(void) {
    const char *name = NULL;
    gil_result_t r = gil_get_preset(rustgil_lock, &name);
    if (r != GIL_OK) {
        mp_raise_msg_varg(&mp_type_RuntimeError, MP_ERROR_TEXT("rust-gil: gil_get_preset: %s"),
            gil_result_str(r));
    }
    if (name == NULL) {
        /* Not reachable from MICROPY_RUST_GIL: its every text names a preset. */
        mp_raise_msg(&mp_type_RuntimeError, MP_ERROR_TEXT("rust-gil: the lock's configuration is no preset"));
    }
    return mp_obj_new_str(name, strlen(name));
}
static MP_DEFINE_CONST_FUN_OBJ_0(rustgil_policy_obj, rustgil_policy);

static mp_obj_t rustgil_options(void) {
    gil_settings_t s = { .struct_size = sizeof s };
    gil_result_t r = gil_get_settings(rustgil_lock, &s);
    if (r != GIL_OK) {
        mp_raise_msg_varg(&mp_type_RuntimeError, MP_ERROR_TEXT("rust-gil: gil_get_settings: %s"),
            gil_result_str(r));
    }
    return mp_obj_new_str(s.options, strlen(s.options));
}
static MP_DEFINE_CONST_FUN_OBJ_0(rustgil_options_obj, rustgil_options);

static mp_obj_t rustgil_presets(void) {
    size_t n = 0;
    while (gil_preset_name(n) != NULL) {
        n++;
    }
    mp_obj_tuple_t *tuple = MP_OBJ_TO_PTR(mp_obj_new_tuple(n, NULL));
    for (size_t i = 0; i < n; i++) {
        const char *name = gil_preset_name(i);
        tuple->items[i] = mp_obj_new_str(name, strlen(name));
    }
    return MP_OBJ_FROM_PTR(tuple);
}
static MP_DEFINE_CONST_FUN_OBJ_0(rustgil_presets_obj, rustgil_presets);

static void rustgil_store(mp_obj_t dict, const char *key, uint64_t value) {
    mp_obj_dict_store(dict, mp_obj_new_str(key, strlen(key)), mp_obj_new_int_from_ull(value));
}

static mp_obj_t rustgil_counters(void) {
    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    gil_result_t r = gil_get_counters(rustgil_lock, &c);
    if (r != GIL_OK) {
        mp_raise_msg_varg(&mp_type_RuntimeError, MP_ERROR_TEXT("rust-gil: gil_get_counters: %s"),
            gil_result_str(r));
    }
    mp_obj_t d = mp_obj_new_dict(9);
    rustgil_store(d, "acquisitions", c.acquisitions);
    rustgil_store(d, "switches", c.switches);
    rustgil_store(d, "drop_requests", c.drop_requests);
    rustgil_store(d, "forced_switches", c.forced_switches);
    rustgil_store(d, "wait_ns", c.wait_ns);
    rustgil_store(d, "preemptions", c.preemptions);
    rustgil_store(d, "lazy_releases", c.lazy_releases);
    rustgil_store(d, "lazy_takeovers", c.lazy_takeovers);
    rustgil_store(d, "starvation_promotions", c.starvation_promotions);
    return d;
}
static MP_DEFINE_CONST_FUN_OBJ_0(rustgil_counters_obj, rustgil_counters);

static mp_obj_t rustgil_switch_interval(size_t n_args, const mp_obj_t *args) {
    gil_result_t r;
    if (n_args == 1) {
        mp_int_t us = mp_obj_get_int(args[0]);
        if (us < 1 || (uint64_t)us > GIL_MAX_SWITCH_INTERVAL_US) {
            mp_raise_msg_varg(&mp_type_ValueError,
                MP_ERROR_TEXT("switch interval must be 1..%u microseconds"),
                (unsigned)GIL_MAX_SWITCH_INTERVAL_US);
        }
        if ((r = gil_set_switch_interval(rustgil_lock, (uint64_t)us)) != GIL_OK) {
            mp_raise_msg_varg(&mp_type_ValueError, MP_ERROR_TEXT("rust-gil: %s"), gil_result_str(r));
        }
        return mp_const_none;
    }
    uint64_t us = 0;
    if ((r = gil_get_switch_interval(rustgil_lock, &us)) != GIL_OK) {
        mp_raise_msg_varg(&mp_type_RuntimeError, MP_ERROR_TEXT("rust-gil: %s"), gil_result_str(r));
    }
    return mp_obj_new_int_from_ull(us);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(rustgil_switch_interval_obj, 0, 1, rustgil_switch_interval);

static const mp_rom_map_elem_t rustgil_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_rustgil) },
    { MP_ROM_QSTR(MP_QSTR_policy), MP_ROM_PTR(&rustgil_policy_obj) },
    { MP_ROM_QSTR(MP_QSTR_options), MP_ROM_PTR(&rustgil_options_obj) },
    { MP_ROM_QSTR(MP_QSTR_presets), MP_ROM_PTR(&rustgil_presets_obj) },
    { MP_ROM_QSTR(MP_QSTR_counters), MP_ROM_PTR(&rustgil_counters_obj) },
    { MP_ROM_QSTR(MP_QSTR_switch_interval), MP_ROM_PTR(&rustgil_switch_interval_obj) },
};
static MP_DEFINE_CONST_DICT(rustgil_module_globals, rustgil_module_globals_table);

const mp_obj_module_t rustgil_user_cmodule = {
    .base = { &mp_type_module },
    .globals = (mp_obj_dict_t *)&rustgil_module_globals,
};

MP_REGISTER_MODULE(MP_QSTR_rustgil, rustgil_user_cmodule);
