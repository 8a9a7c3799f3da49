/*
 * Python/ceval_gil_rust.h: CPython 3.13's and 3.14's GIL core, routed to the
 * rust-gil library (gil.h).
 *
 * Maintained in the rust-gil repository (cpython/shim/); the CPython patch
 * carries it as a new file (scripts/gen-cpython-patch.sh). Python/ceval_gil.c
 * includes it, when configured --with-rust-gil, in place of its own static
 * functions _gil_initialize, gil_created, create_gil, destroy_gil,
 * recreate_gil, drop_gil, take_gil, _PyEval_SetSwitchInterval and
 * _PyEval_GetSwitchInterval;
 * everything else in ceval_gil.c (eval breaker, pending calls, PyEval_* API)
 * is unchanged and calls these. The observers the options start, and the
 * switch for thread naming, are in ceval_gil_rust_observe.h (included
 * below).
 *
 * The mapping:
 *   - one gil_t per _gil_runtime_state, so each interpreter that owns a GIL
 *     (the main one, sub-interpreters with their own GIL) has its own lock;
 *   - the thread token is the PyThreadState pointer;
 *   - the library's drop-request callback sets _PY_GIL_DROP_REQUEST_BIT in
 *     the holder's eval breaker; the library calls it under its own mutex
 *     while that thread still holds the GIL, so the thread state is alive;
 *   - release reasons: final_release -> GIL_RELEASE_FINAL; a detach made by
 *     _Py_HandlePending to answer a drop request -> GIL_RELEASE_FORCED
 *     (marked by _PyRustGil_MarkForcedRelease); every other release
 *     (PyEval_SaveThread, Py_BEGIN_ALLOW_THREADS, ...) -> GIL_RELEASE_VOLUNTARY;
 *   - threads that must exit during finalization: take_gil waits with
 *     gil_acquire_or_abort, asking _PyThreadState_MustExit after each switch
 *     interval, and stops the thread from here (never through the library's
 *     frames): 3.13 exits it, 3.14 hangs it (rustgil_stop_thread);
 *   - the holder's thread state says it holds the GIL (3.13:
 *     tstate->_status.holds_gil, 3.14: tstate->holds_gil; RUSTGIL_HOLDS_GIL);
 *   - gil->locked, gil->last_holder, gil->switch_number and gil->interval are
 *     kept up to date for readers of _Py_DebugOffsets (debuggers, py-spy,
 *     3.14's _remote_debugging); gil->locked keeps its -1 "not created"
 *     value; gil->interval is read and written atomically, as 3.14 does;
 *   - sys.setswitchinterval() keeps the interval it is given, as stock
 *     does; the lock gets at most one hour (see _PyEval_SetSwitchInterval);
 *   - the policy is a library preset (classic, priority, lazy,
 *     priority-lazy, monitor, priority-monitor, priority-lazy-monitor),
 *     optionally followed by tuning options, e.g.
 *     priority-lazy,lazy_us=30,spin_us=20,laps=3 (the library's grammar,
 *     gil_config_parse; interval_us=N sets the starting interval), from
 *     -X rust_gil=..., else PYTHON_RUST_GIL
 *     (or its earlier name PYTHONRUSTGIL; both ignored under -E / -I, like
 *     PYTHON_GIL), else the build's default (--with-rust-gil-policy); see
 *     rustgil_config_from_options. The library parses it for the host
 *     "cpython" (gil_config_parse_host): a preset's name stands for
 *     CPython's default for it, which the library keeps (the presets of
 *     the priority policy spin 50 us for a hand-off), and options given
 *     win over it; the shim sets no value itself. Reports (_rustgil,
 *     traces' titles) print the options text the lock is
 *     (gil_get_settings), which builds the same lock on every host. Read
 *     once, when the main interpreter creates its GIL. Anything malformed
 *     ends start-up as a bad PYTHONMALLOC does (a message, exit status 1),
 *     never a silent default.
 */

#ifdef Py_GIL_DISABLED
#  error "--with-rust-gil cannot be combined with --disable-gil"
#endif

#include <gil.h>
#include <stdio.h>      // snprintf()
#include <stdlib.h>     // getenv()
#include <string.h>     // strcmp()
#include <unistd.h>     // getpid()
#include <wchar.h>      // wcschr()

#include "pycore_fileutils.h"  // _Py_EncodeUTF8Ex()
#include "pycore_initconfig.h"  // _Py_get_xoption()

/* Where 3.13 and 3.14 differ around the GIL core. */
#if PY_VERSION_HEX >= 0x030E0000
   /* 3.14 marks the holder in a field of its own (a bit of _status was
      racy to write beside the others). */
#  define RUSTGIL_HOLDS_GIL(tstate) ((tstate)->holds_gil)
#else
#  define RUSTGIL_HOLDS_GIL(tstate) ((tstate)->_status.holds_gil)
#endif

/* Stops a thread that must not run on because its interpreter finalized
   (_PyThreadState_MustExit): 3.13 exits it; 3.14 hangs it for good
   (gh-87135: exiting skips C++ unwinding and destructors), releasing its
   thread state's reference. Called from take_gil only, never from inside
   the library's frames. */
static void
rustgil_stop_thread(PyThreadState *tstate)
{
#if PY_VERSION_HEX >= 0x030E0000
    _PyThreadState_HangThread(tstate);
#else
    (void)tstate;
    PyThread_exit_thread();
#endif
}

#define DEFAULT_INTERVAL GIL_DEFAULT_SWITCH_INTERVAL_US
/* The host whose defaults the library applies to the options. */
#define RUSTGIL_HOST "cpython"
/* The options when neither -X rust_gil nor PYTHON_RUST_GIL gives them:
   configure's --with-rust-gil-policy; without it (NULL), the library's
   default for CPython. */
#ifdef Py_RUST_GIL_DEFAULT_POLICY
#  define RUSTGIL_DEFAULT_POLICY Py_RUST_GIL_DEFAULT_POLICY
#else
#  define RUSTGIL_DEFAULT_POLICY NULL
#endif

/* Set by _Py_HandlePending just before it detaches to answer a drop
   request; consumed by the drop_gil that detach performs. */
static _Py_thread_local int rustgil_forced_release = 0;

static inline void
_PyRustGil_MarkForcedRelease(void)
{
    rustgil_forced_release = 1;
}

static inline gil_t *
rustgil_of(struct _gil_runtime_state *gil)
{
    return (gil_t *)gil->rust_gil;
}

#define RUSTGIL_CHECK(call)                                                   \
    do {                                                                      \
        gil_result_t rustgil_r_ = (call);                                     \
        if (rustgil_r_ != GIL_OK) {                                           \
            _Py_FatalErrorFormat(__func__, "rust-gil: %s: %s", #call,         \
                                 gil_result_str(rustgil_r_));                 \
        }                                                                     \
    } while (0)

/* The library's drop-request callback. Runs on a waiting thread, under the
   library's mutex, while `holder` holds the GIL. */
static void
rustgil_on_drop_request(void *user_data, void *holder)
{
    (void)user_data;
    _Py_set_eval_breaker_bit((PyThreadState *)holder, _PY_GIL_DROP_REQUEST_BIT);
}

/* gil_acquire_or_abort's check, after each switch interval spent waiting. */
static bool
rustgil_must_exit(void *tstate)
{
    return _PyThreadState_MustExit((PyThreadState *)tstate) != 0;
}

/* Where the options came from, for messages about them later; the value
   whole, in memory of its own (PyMem_RawMalloc), since a variable may be
   changed later by the program. */
static const char *rustgil_options_source = "";
static char *rustgil_options_value = NULL;

/* -X rust_gil's value (the first -X rust_gil, as CPython takes the first
   -X gil) as UTF-8, whole, in memory the caller frees with PyMem_RawFree,
   or NULL if there is none. The main interpreter's configuration is
   complete when it creates its GIL. A surrogate-escaped byte (how Python
   keeps undecodable command-line bytes) comes back as that byte. A value
   that cannot be encoded (out of memory, a lone surrogate) comes back as a
   text the parser refuses with a message saying so: never run. */
static char *
rustgil_xoption(void)
{
    const wchar_t *option = _Py_get_xoption(&_PyRuntime._main_interpreter.config.xoptions,
                                            L"rust_gil");
    if (option == NULL) {
        return NULL;
    }
    const wchar_t *value = wcschr(option, L'=');
    char *utf8 = NULL;
    if (_Py_EncodeUTF8Ex(value ? value + 1 : L"", &utf8, NULL, NULL, 1,
                         _Py_ERROR_SURROGATEESCAPE) == 0) {
        return utf8;
    }
    return _PyMem_RawStrdup("(not encodable as UTF-8)");
}

/* The configuration the interpreter was started with, into *config. The
   first of these that is given wins:
     1. -X rust_gil=VALUE (also under -E and -I, as -X gil is);
     2. PYTHON_RUST_GIL=VALUE, in CPython's own naming (PYTHON_GIL,
        PYTHON_CPU_COUNT); ignored under -E / -I, and when empty, as CPython
        treats an empty PYTHON* variable;
     3. PYTHONRUSTGIL=VALUE, the variable's earlier name (kept so that
        existing scripts keep working; the same rules as PYTHON_RUST_GIL);
     4. the build's default, RUSTGIL_DEFAULT_POLICY (--with-rust-gil-policy),
        else the library's default for CPython.
   Anything it cannot honour ends the process as a bad PYTHONMALLOC does:
   "Fatal Python error: ..." naming where the value came from, on stderr,
   exit status 1 (CPython's Py_ExitStatusException), not an abort. An empty
   -X rust_gil= is such an error: unlike a variable, an option is never set
   by accident. */
static void
rustgil_config_from_options(gil_config_t *config, gil_options_t *observe)
{
    char *xvalue = rustgil_xoption();
    const char *value = xvalue;
    const char *source = "-X rust_gil";
    if (value == NULL && _PyRuntime.preconfig.use_environment) {
        static const char *const names[] = {"PYTHON_RUST_GIL", "PYTHONRUSTGIL"};
        for (size_t i = 0; i < sizeof names / sizeof names[0] && value == NULL; i++) {
            const char *env = getenv(names[i]);
            if (env != NULL && env[0] != '\0') {
                value = env;
                source = names[i];
            }
        }
    }
    if (value == NULL) {
        value = RUSTGIL_DEFAULT_POLICY;
        source = "the build's default GIL policy (--with-rust-gil-policy)";
    }
    /* The library's grammar for this host (gil_config_parse_host; a NULL
       value is the library's default); its message names the value,
       escaped (at most 4 bytes for each of the value's), and what is
       wrong in it, whatever the value's length. */
    char short_why[512];
    size_t why_len = 4 * (value != NULL ? strlen(value) : 0) + 512;
    char *why = PyMem_RawMalloc(why_len);
    if (why == NULL) {
        why = short_why;
        why_len = sizeof short_why;
    }
    if (gil_config_parse_host(RUSTGIL_HOST, value, config, observe, why, why_len) != GIL_OK) {
        /* Py_ExitStatusException keeps a pointer to the message and ends
           the process: the memory is never freed. */
        size_t message_len = strlen(source) + why_len + 2;
        char *message = PyMem_RawMalloc(message_len);
        if (message == NULL) {
            Py_ExitStatusException(_PyStatus_NO_MEMORY());
        }
        snprintf(message, message_len, "%s=%s", source, why);
        Py_ExitStatusException(_PyStatus_ERR(message));
    }
    if (why != short_why) {
        PyMem_RawFree(why);
    }
    rustgil_options_source = source;
    char *copy = _PyMem_RawStrdup(value != NULL ? value : "");
    PyMem_RawFree(xvalue);
    if (copy == NULL) {
        Py_ExitStatusException(_PyStatus_NO_MEMORY());
    }
    PyMem_RawFree(rustgil_options_value);
    rustgil_options_value = copy;
}

/* The policy of every GIL in the process: the options as read when the
   main interpreter created its GIL (at start-up, and again at each later
   Py_Initialize). Sub-interpreters with their own GIL take it from here
   rather than reading the variable again, so a change to os.environ after
   start-up can neither change their policy nor end the process when one is
   created. */
static gil_config_t rustgil_env_config;
static gil_options_t rustgil_env_observe;
static int rustgil_env_config_read = 0;

static void
_gil_initialize(struct _gil_runtime_state *gil)
{
    gil->locked = -1;
    _Py_atomic_store_ulong_relaxed(&gil->interval, DEFAULT_INTERVAL);
    gil->rust_gil = NULL;
}

static int
gil_created(struct _gil_runtime_state *gil)
{
    if (gil == NULL) {
        return 0;
    }
    return (_Py_atomic_load_int_acquire(&gil->locked) >= 0);
}

/* What the lock is given for CPython's interval (see _PyEval_SetSwitchInterval). */
static uint64_t
rustgil_lock_interval(unsigned long microseconds)
{
    return microseconds > GIL_MAX_SWITCH_INTERVAL_US ? GIL_MAX_SWITCH_INTERVAL_US : microseconds;
}

/* The observers the options start, thread naming, tagging. */
#include "ceval_gil_rust_observe.h"

static void
create_gil(struct _gil_runtime_state *gil)
{
    int main_gil = gil == &_PyRuntime._main_interpreter._gil;
    if (main_gil || !rustgil_env_config_read) {
        rustgil_config_from_options(&rustgil_env_config, &rustgil_env_observe);
        rustgil_env_config_read = 1;
    }
    if (rustgil_env_observe.given & GIL_OPTION_INTERVAL_US) {
        /* interval_us=N: the interval the interpreter starts with, as if
           sys.setswitchinterval had been called first. */
        _Py_atomic_store_ulong_relaxed(&gil->interval,
                                       (unsigned long)rustgil_env_config.switch_interval_us);
    }
    gil_config_t config = rustgil_env_config;
    config.switch_interval_us = rustgil_lock_interval(_Py_atomic_load_ulong_relaxed(&gil->interval));
    config.on_drop_request = rustgil_on_drop_request;
    gil_t *lock = NULL;
    RUSTGIL_CHECK(gil_new(&config, &lock));
    if (main_gil) {
        rustgil_start_observers(lock, 0, &rustgil_env_observe, rustgil_options_source, rustgil_options_value);
    }
    gil->rust_gil = lock;
    gil->switch_number = 0;
    _Py_atomic_store_ptr_relaxed(&gil->last_holder, 0);
    _Py_atomic_store_int_release(&gil->locked, 0);
}

static void
destroy_gil(struct _gil_runtime_state *gil)
{
    /* A second Py_Initialize whose first Py_FinalizeEx did not write the
       trace (Py_AtExit's list was full): the trace of the first one ends
       here. */
    if (rustgil_env_trace_lock != NULL && rustgil_env_trace_lock == rustgil_of(gil)) {
        rustgil_write_env_trace();
    }
    /* A daemon thread may still be waiting (it exits at its next switch
       interval, see take_gil). Then the lock cannot be freed safely: it is
       left allocated, a deliberate leak at interpreter shutdown. */
    if (gil_free(rustgil_of(gil)) == GIL_OK) {
        gil->rust_gil = NULL;
    }
    _Py_atomic_store_int_release(&gil->locked, -1);
}

#ifdef HAVE_FORK
/* In the child after fork(): a fresh, free lock. The library re-creates its
   mutex and condition variables (other threads are gone); the caller,
   _PyEval_ReInitThreads, takes it right after with take_gil(). */
static void
recreate_gil(struct _gil_runtime_state *gil)
{
    gil_t *lock = rustgil_of(gil);
    void *token = gil;  /* any token: the lock is handed over at once */
    RUSTGIL_CHECK(gil_reinit_after_fork(lock, token));
    RUSTGIL_CHECK(gil_release(lock, token, GIL_RELEASE_FINAL));
    /* The parent's trace was dropped by gil_reinit_after_fork; the child
       starts its own (into its own file, if the path has %p). */
    if (lock == rustgil_env_trace_lock || (gil == &_PyRuntime._main_interpreter._gil
                                          && rustgil_env_observe.trace[0] != '\0')) {
        rustgil_env_trace_lock = NULL;
        rustgil_start_observers(lock, 1, &rustgil_env_observe, rustgil_options_source,
                                rustgil_options_value);
    }
    gil->switch_number = 0;
    _Py_atomic_store_ptr_relaxed(&gil->last_holder, 0);
    _Py_atomic_store_int_release(&gil->locked, 0);
}
#endif

/* Releases on behalf of `token`. If the GIL is held under another thread
   state of this OS thread (a PyThreadState_Swap without detaching, which
   CPython's own drop_gil tolerates by fixing last_holder), release it for
   that holder. */
static void
rustgil_release(gil_t *lock, void *token, gil_release_reason_t reason)
{
    gil_result_t r = gil_release(lock, token, reason);
    if (r == GIL_ERR_NOT_HOLDER) {
        void *holder = NULL;
        RUSTGIL_CHECK(gil_get_holder(lock, &holder));
        if (holder == NULL) {
            Py_FatalError("drop_gil: GIL is not locked");
        }
        r = gil_release(lock, holder, reason);
    }
    if (r != GIL_OK) {
        _Py_FatalErrorFormat("drop_gil", "rust-gil: gil_release: %s", gil_result_str(r));
    }
}

static void
drop_gil(PyInterpreterState *interp, PyThreadState *tstate, int final_release)
{
    int forced = rustgil_forced_release;
    rustgil_forced_release = 0;
    assert(final_release || tstate != NULL);
    struct _gil_runtime_state *gil = interp->ceval.gil;
    if (!_Py_atomic_load_int_relaxed(&gil->locked)) {
        Py_FatalError("drop_gil: GIL is not locked");
    }
    if (tstate != NULL) {
        RUSTGIL_HOLDS_GIL(tstate) = 0;
    }
    /* Mirror first: once released, another thread may set it to 1. */
    _Py_atomic_store_int_relaxed(&gil->locked, 0);
    gil_release_reason_t reason = final_release ? GIL_RELEASE_FINAL
                                  : forced      ? GIL_RELEASE_FORCED
                                                : GIL_RELEASE_VOLUNTARY;
    rustgil_release(rustgil_of(gil), tstate, reason);
}

/* Take the GIL. Keeps errno. tstate must be non-NULL. */
static void
take_gil(PyThreadState *tstate)
{
    int err = errno;

    assert(tstate != NULL);
    if (_PyThreadState_MustExit(tstate)) {
        /* bpo-39877: a daemon thread after Py_Finalize(); on 3.13 tstate
           may be dangling. */
        rustgil_stop_thread(tstate);
    }

    assert(_PyThreadState_CheckConsistency(tstate));
    PyInterpreterState *interp = tstate->interp;
    struct _gil_runtime_state *gil = interp->ceval.gil;
    assert(gil_created(gil));
    gil_t *lock = rustgil_of(gil);

    /* A drop request left over from this thread's previous turn (answered
       by a voluntary release) is stale. Clear it before waiting: only the
       holder is ever asked to drop, so no fresh request can be lost here. */
    _Py_unset_eval_breaker_bit(tstate, _PY_GIL_DROP_REQUEST_BIT);

    gil_result_t r = gil_acquire_or_abort(lock, tstate, rustgil_must_exit, tstate);
    if (r == GIL_ERR_ABORTED) {
        /* Finalizing and this is not the finalizing thread. Stop here, not
           inside the library. If this thread's request was the only one
           pending, the library has withdrawn it, so no holder waits for us
           (gh-96387). */
        rustgil_stop_thread(tstate);
    }
    if (r != GIL_OK) {
        _Py_FatalErrorFormat(__func__, "rust-gil: gil_acquire: %s", gil_result_str(r));
    }

    /* Mirrors for _Py_DebugOffsets readers. */
    _Py_atomic_store_int_relaxed(&gil->locked, 1);
    if ((PyThreadState *)_Py_atomic_load_ptr_relaxed(&gil->last_holder) != tstate) {
        _Py_atomic_store_ptr_relaxed(&gil->last_holder, tstate);
        gil->switch_number++;
    }

    if (_PyThreadState_MustExit(tstate)) {
        /* bpo-36475: a daemon thread that was waiting while the main thread
           finalized. tstate may be dangling: the library never dereferences
           tokens, so releasing under it is safe. */
        _Py_atomic_store_int_relaxed(&gil->locked, 0);
        rustgil_release(lock, tstate, GIL_RELEASE_FINAL);
        rustgil_stop_thread(tstate);
    }
    assert(_PyThreadState_CheckConsistency(tstate));

    RUSTGIL_HOLDS_GIL(tstate) = 1;
    update_eval_breaker_for_thread(interp, tstate);
    rustgil_tag_thread(lock, tstate);

    errno = err;
}

/* sys.setswitchinterval() keeps the interval it is given, exactly as stock
   CPython does: gil->interval holds CPython's value (what
   _PyEval_GetSwitchInterval, and so sys.getswitchinterval(), returns, and
   what _Py_DebugOffsets readers see), whatever it is: sysmodule.c has
   already turned the float into an unsigned long, so inf, 1e30 and values
   below 1 µs arrive as 0 and NaN as whatever the platform's cast makes of
   it, in both builds alike. The lock itself is given at most
   GIL_MAX_SWITCH_INTERVAL_US (one hour), its own limit: a waiter then asks
   the holder to drop after an hour rather than after, say, 1e9 seconds,
   which no program can tell apart unless one of its threads waits longer
   than an hour behind a holder that never releases. 0 reaches the lock as
   0, which it treats as 1 µs, as stock's take_gil does. */
void
_PyEval_SetSwitchInterval(unsigned long microseconds)
{
    PyInterpreterState *interp = _PyInterpreterState_GET();
    struct _gil_runtime_state *gil = interp->ceval.gil;
    assert(gil != NULL);
    _Py_atomic_store_ulong_relaxed(&gil->interval, microseconds);  /* also what create_gil starts with */
    if (rustgil_of(gil) != NULL) {
        RUSTGIL_CHECK(gil_set_switch_interval(rustgil_of(gil), rustgil_lock_interval(microseconds)));
    }
}

unsigned long
_PyEval_GetSwitchInterval(void)
{
    PyInterpreterState *interp = _PyInterpreterState_GET();
    struct _gil_runtime_state *gil = interp->ceval.gil;
    assert(gil != NULL);
    return _Py_atomic_load_ulong_relaxed(&gil->interval);
}

/* For Modules/_rustgilmodule.c: the current interpreter's lock. Not
   exported (the core is compiled with hidden visibility): the module is
   built in, and the library behind the pointer exports nothing either. */
extern void *_PyRustGil_Current(void);

void *
_PyRustGil_Current(void)
{
    PyInterpreterState *interp = _PyInterpreterState_GET();
    struct _gil_runtime_state *gil = interp->ceval.gil;
    return gil == NULL ? NULL : gil->rust_gil;
}
