/*
 * Python/ceval_gil_rust_observe.h: the observers of CPython's rust-gil
 * lock that belong to the core: those the options start (stats=1,
 * trace=PATH; ceval_gil_rust.h reads them and passes them in), the trace
 * they write at exit, the tagging of each thread's record with its ident,
 * and the switch that turns thread naming on. Included by
 * Python/ceval_gil_rust.h; it uses nothing of it.
 *
 * Maintained in the rust-gil repository (cpython/shim/); the CPython patch
 * carries it as a new file (scripts/gen-cpython-patch.sh).
 *
 * Thread naming lives in Modules/_rustgilmodule.c (it needs the threading
 * module's names). The core owns the audit hook that drives it and calls
 * the namer the module registers (_PyRustGil_SetNamer), importing the
 * module the first time a thread starts with naming on: the core never
 * links against the module, and the module reads core state only through
 * the calls below.
 */

/* Whether threads are named: set for good by _PyRustGil_StartNaming. While
   set, take_gil tags each thread's record with its ident
   (rustgil_tag_thread), so that the namer can name threads after they
   end. */
static int rustgil_naming = 0;
static Py_AuditHookFunction rustgil_namer = NULL;

/* The core's audit hook: on the main interpreter, hands each event to the
   module's namer, importing the module at the first thread start if it
   has not registered one yet. */
static int
rustgil_naming_audit(const char *event, PyObject *args, void *data)
{
    if (!rustgil_naming || PyInterpreterState_Get() != PyInterpreterState_Main()) {
        return 0;
    }
    if (rustgil_namer == NULL) {
        if (strcmp(event, "_thread.start_joinable_thread") != 0) {
            return 0;
        }
        /* Its exec registers the namer. Names are a nicety: a failure to
           import leaves the threads unnamed, never the start failing. */
        PyObject *exc = PyErr_GetRaisedException();
        Py_XDECREF(PyImport_ImportModule("_rustgil"));
        PyErr_Clear();
        PyErr_SetRaisedException(exc);
        if (rustgil_namer == NULL) {
            return 0;
        }
    }
    return rustgil_namer(event, args, data);
}

/* For Modules/_rustgilmodule.c (built in; not exported): registers the
   namer the core's audit hook calls. */
extern void _PyRustGil_SetNamer(Py_AuditHookFunction namer);

void
_PyRustGil_SetNamer(Py_AuditHookFunction namer)
{
    rustgil_namer = namer;
}

/* For the options' observers and Modules/_rustgilmodule.c: turns naming on
   (tagging, and the audit hook, added once). 0, or -1 with an exception
   if the hook could not be added. */
extern int _PyRustGil_StartNaming(void);

int
_PyRustGil_StartNaming(void)
{
    static int hooked = 0;
    rustgil_naming = 1;
    if (hooked) {
        return 0;
    }
    hooked = 1;
    return PySys_AddAuditHook(rustgil_naming_audit, NULL);
}

/* With naming on: tags the record of this thread's life with its ident
   (at each acquisition: a record may begin at any of them, e.g. when the
   accounting is turned on again), so it can be named after it ends. A
   token without a record (accounting off) is left alone; a record tagged
   already is found in the thread's own cache, without a lock. */
static inline void
rustgil_tag_thread(gil_t *lock, PyThreadState *tstate)
{
    if (rustgil_naming) {
        (void)gil_tag_thread(lock, tstate, (uint64_t)tstate->thread_id);
    }
}

/* The trace the options started (on the main interpreter's lock) and its
   file, for the message if it cannot be written at exit. */
static gil_t *rustgil_env_trace_lock = NULL;
static char rustgil_env_trace_path[GIL_TRACE_PATH_MAX + 256];

/* Writes the trace the options started, at the end of Py_FinalizeEx (the
   main interpreter's lock is never freed at finalization, see destroy_gil)
   or else at exit; nothing if it was stopped already
   (_rustgil.trace_stop()) or never started in this process. A fork child
   that leaves by os._exit writes nothing; nor does a process killed by a
   signal Python does not handle (SIGTERM, SIGKILL by default). */
static void
rustgil_write_env_trace(void)
{
    gil_t *lock = rustgil_env_trace_lock;
    if (lock == NULL) {
        return;
    }
    rustgil_env_trace_lock = NULL;
    gil_result_t r = gil_trace_stop(lock, NULL);
    if (r != GIL_OK && r != GIL_ERR_NOT_TRACING) {
        fprintf(stderr, "rust-gil: the GIL trace could not be written to '%s': %s\n",
                rustgil_env_trace_path, gil_result_str(r));
    }
}

/* Starts the observers options `o` ask for on the main interpreter's lock
   (the library's gil_options_start), with the accounting on for a trace
   too, since rows are named through the records. In a fork child (child =
   1) a trace starts only if its path has %p: the parent's file is the
   parent's. A trace that cannot start ends start-up (or, in a child, is
   reported on stderr) naming the file and where the options came from
   (`source`='`value`'). */
static void
rustgil_start_observers(gil_t *lock, int child, const gil_options_t *o, const char *source,
                        const char *value)
{
    if (o->stats || o->trace[0] != '\0') {
        gil_result_t r = gil_set_thread_stats(lock, true);
        if (r != GIL_OK) {
            _Py_FatalErrorFormat(__func__, "rust-gil: gil_set_thread_stats: %s", gil_result_str(r));
        }
        (void)_PyRustGil_StartNaming();
    }
    /* The title names the options text the lock is, which builds the
       same lock again on any host. */
    char title[GIL_OPTIONS_TEXT_MAX + 100];
    gil_settings_t settings = {.struct_size = sizeof settings};
    gil_result_t got = gil_get_settings(lock, &settings);
    snprintf(title, sizeof title, "Python %s, GIL options %s, pid %ld", PY_VERSION,
             got == GIL_OK && settings.options[0] != '\0' ? settings.options : "?", (long)getpid());
    char why[GIL_TRACE_PATH_MAX + 256];
    if (gil_options_start(lock, o, title, child ? GIL_OPTIONS_FORK_CHILD : 0, rustgil_env_trace_path,
                          sizeof rustgil_env_trace_path, why, sizeof why) != GIL_OK) {
        /* Py_ExitStatusException keeps a pointer to the message: static. */
        static char message[sizeof why + 400];
        snprintf(message, sizeof message, "%s='%.300s': %s", source, value, why);
        if (child) {
            fprintf(stderr, "rust-gil: %s\n", message);
            return;
        }
        Py_ExitStatusException(_PyStatus_ERR(message));
    }
    if (rustgil_env_trace_path[0] == '\0') {
        return;
    }
    rustgil_env_trace_lock = lock;
    /* Written by Py_FinalizeEx's last step (Py_AtExit), which every end
       with Python's own cleanup reaches: the end of the script, sys.exit,
       an uncaught exception, and an uncaught KeyboardInterrupt, after which
       Py_RunMain kills the process with SIGINT, so exit(3) never runs.
       Registered at each Py_Initialize (each finalization empties the
       list); a fork child inherits its parent's. exit(3)'s handler stays
       for an embedder that exits without Py_FinalizeEx. */
    if (!child) {
        (void)Py_AtExit(rustgil_write_env_trace);
    }
    static int registered = 0;
    if (!registered) {
        registered = 1;
        atexit(rustgil_write_env_trace);
    }
}
