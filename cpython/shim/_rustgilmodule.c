/*
 * _rustgil: the rust-gil library as seen from Python, in interpreters built
 * --with-rust-gil. Maintained in the rust-gil repository (cpython/shim/);
 * the CPython patch carries it as a new file (scripts/gen-cpython-patch.sh),
 * and configure --with-rust-gil builds it in (PY_STDLIB_MOD,
 * Modules/Setup.stdlib.in).
 *
 *   _rustgil.version           the library's version (str)
 *   _rustgil.options()         the options text this interpreter's GIL is
 *                              (str), e.g. priority,spin_us=50: what a
 *                              report prints, and what PYTHON_RUST_GIL (or
 *                              any host's variable) takes to build the same
 *                              lock again
 *   _rustgil.settings()        dict: all the lock's settings: options,
 *                              preset, policy, monitor (gil_get_settings),
 *                              and each number setting under its options
 *                              key (gil_setting_key): interval_us, lazy_us
 *                              (0 when off), spin_us, laps
 *   _rustgil.policy()          this interpreter's GIL policy: the preset
 *                              name (classic, priority, lazy, priority-lazy,
 *                              monitor, priority-monitor,
 *                              priority-lazy-monitor); the name alone, not
 *                              what CPython's default sets on top of it
 *                              (options() says that)
 *   _rustgil.presets()         the policy names -X rust_gil and
 *                              PYTHON_RUST_GIL accept (a tuple)
 *   _rustgil.lazy_release()    the lazy-release threshold in seconds, 0.0
 *                              when off (this and the four below: fields of
 *                              settings())
 *   _rustgil.spin()            the bounded spin in seconds, 0.0 when off
 *   _rustgil.laps()            the bound on laps (int), 0 when off
 *   _rustgil.monitor()         whether the monitor thread keeps the time
 *   _rustgil.monitor_wakeups() how often the process's monitor thread woke up
 *   _rustgil.switch_interval() the switch interval the lock works with, in
 *                              seconds (float): sys.getswitchinterval() up
 *                              to one hour, one hour above it (the lock's
 *                              maximum; see ceval_gil_rust.h)
 *   _rustgil.counters()        dict: acquisitions, switches, drop_requests,
 *                              forced_switches, wait_ns, preemptions,
 *                              lazy_releases, lazy_takeovers,
 *                              starvation_promotions, cpu_spin_takes
 *   _rustgil.enable_histograms(on=True), _rustgil.reset_histograms()
 *   _rustgil.stats()           dict: the counters, plus histograms_enabled
 *                              and wait_histogram / hold_histogram (lists of
 *                              64 counts; bucket i: [2**i, 2**(i+1)) ns)
 *   _rustgil.trace_start(path, title=None, max_events=0)
 *                              records this interpreter's GIL events for a
 *                              timeline: path ends in .json (Chrome trace
 *                              events, for Perfetto) or .svg
 *   _rustgil.trace_stop()      names the rows after the live threads,
 *                              writes the file, returns the event count
 *   _rustgil.set_thread_stats(on=True), _rustgil.thread_stats_enabled()
 *   _rustgil.thread_stats()    per-thread accounting keyed by thread ident
 *   _rustgil.measure()         context manager: the calling thread's GIL
 *                              time inside a block
 *   _rustgil.name_thread(name) names the calling thread for the observers,
 *                              over its threading name, for its life
 */
#ifndef Py_BUILD_CORE_BUILTIN
#  define Py_BUILD_CORE_MODULE 1
#endif

#include "Python.h"
#include <gil.h>
#include <errno.h>
#include <sys/stat.h>            /* lstat */
#include <unistd.h>              /* access */
#include <stddef.h>              /* offsetof */

#ifndef Py_RUST_GIL
#  error "_rustgil needs an interpreter configured --with-rust-gil"
#endif

/* Defined in Python/ceval_gil_rust.h; not exported (this module is built
   in). */
extern void *_PyRustGil_Current(void);

static gil_t *
current_lock(void)
{
    gil_t *lock = (gil_t *)_PyRustGil_Current();
    if (lock == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this interpreter has no GIL");
    }
    return lock;
}

static PyObject *
lock_error(const char *what, gil_result_t r)
{
    PyErr_Format(PyExc_RuntimeError, "rust-gil: %s: %s", what, gil_result_str(r));
    return NULL;
}

/* ---- naming threads as they start ---------------------------------------

   Traces and per-thread records are keyed by thread-state pointers, which
   CPython reuses; the shim tags each thread's record with its ident when
   the thread first takes the GIL (rustgil_tag_thread in
   ceval_gil_rust.h). Names come from the threading module: an audit hook
   sees each thread start (_thread.start_joinable_thread: the function is a
   bound Thread._bootstrap, the third argument the thread's handle, whose
   ident is known once the start returns) and keeps (handle, name) until
   the thread's record has its tag; then gil_name_tagged names that record
   and its row in a running trace, even if the thread has ended meanwhile.
   Pending names are settled at each later audit event, at trace_stop() and
   thread_stats(), and at exit (an atexit callback, which runs after the
   threading module has joined its threads).

   A name given with _rustgil.name_thread() wins over threading's for the
   rest of the thread's life: it is kept in the thread state's dict (which
   lives as long as the thread), the thread's pending threading name is
   dropped, and the automatic naming gives the explicit name instead, also
   to a record that began after the name was given (the accounting was
   off then, or turned off and on since). */

#define EXPLICIT_NAME_KEY "_rustgil.name"

enum { MAX_PENDING = 4096 };
/* A thread seen starting: its handle, its name, and when (gil_now_ns()):
   its record began after that, which tells it from later threads that
   reuse its ident. */
static struct { PyObject *handle; char *name; uint64_t seen_ns; } rustgil_pending[MAX_PENDING];
static size_t rustgil_npending = 0;
static int rustgil_in_audit = 0;
static int rustgil_atexit_registered = 0;

/* The lock whose accounting trace_start() turned on, to turn it off again
   at trace_stop(); NULL if it was on already or the user has set it since. */
static gil_t *trace_turned_stats_on = NULL;

/* Defined in Python/ceval_gil_rust_observe.h: the core's switch for
   naming, and the registration of this module's namer (rustgil_audit),
   which the core's audit hook calls. */
extern int _PyRustGil_StartNaming(void);
extern void _PyRustGil_SetNamer(Py_AuditHookFunction namer);

/* How long a started thread may go without a tagged record before its
   name is given up (it never took the GIL with the accounting on: the
   accounting was off, the start failed, the record was dropped). */
#define PENDING_TIMEOUT_NS 2000000000ULL

/* The ident of pending thread i (its Thread's `ident`), 0 if it has none
   yet or cannot be read; clears any error. */
static unsigned long long
pending_ident(size_t i)
{
    PyObject *attr = PyObject_GetAttrString(rustgil_pending[i].handle, "ident");
    unsigned long long id = attr ? PyLong_AsUnsignedLongLong(attr) : 0;
    Py_XDECREF(attr);
    PyErr_Clear();
    return id == (unsigned long long)-1 ? 0 : id;
}

/* Names the pending threads whose records carry their tag now, and
   forgets those that will not get one. */
static void
settle_pending_names(gil_t *lock)
{
    PyObject *exc = PyErr_GetRaisedException();
    uint64_t now = gil_now_ns();
    size_t kept = 0;
    for (size_t i = 0; i < rustgil_npending; i++) {
        unsigned long long id = pending_ident(i);
        int named = id != 0 &&
                    gil_name_tagged(lock, (uint64_t)id, rustgil_pending[i].seen_ns,
                                    rustgil_pending[i].name) == GIL_OK;
        if (named || now - rustgil_pending[i].seen_ns > PENDING_TIMEOUT_NS) {
            Py_DECREF(rustgil_pending[i].handle);
            PyMem_RawFree(rustgil_pending[i].name);
            continue;
        }
        rustgil_pending[kept++] = rustgil_pending[i];
    }
    rustgil_npending = kept;
    PyErr_SetRaisedException(exc);
}

/* Drops the pending threading name of the thread `ident`, which has named
   itself, after settling the others: an ended thread that had the same
   ident before it gets its own name first. Main interpreter only (the
   pending names are the main interpreter's). */
static void
forget_pending_name(gil_t *lock, unsigned long ident)
{
    if (rustgil_npending == 0 || PyInterpreterState_Get() != PyInterpreterState_Main()) {
        return;
    }
    settle_pending_names(lock);
    PyObject *exc = PyErr_GetRaisedException();
    size_t kept = 0;
    for (size_t i = 0; i < rustgil_npending; i++) {
        if (pending_ident(i) == (unsigned long long)ident) {
            Py_DECREF(rustgil_pending[i].handle);
            PyMem_RawFree(rustgil_pending[i].name);
            continue;
        }
        rustgil_pending[kept++] = rustgil_pending[i];
    }
    rustgil_npending = kept;
    PyErr_SetRaisedException(exc);
}

/* One of this interpreter's threads: its state (a token for the lock,
   never dereferenced once taken), its ident and its dict (a new
   reference, or NULL). */
typedef struct {
    PyThreadState *ts;
    unsigned long ident;
    PyObject *dict;
} live_thread_t;

/* This interpreter's threads into *out (PyMem_Free it after
   release_live_threads), or 0 threads if out of memory. Runs no Python
   code: the GIL is held throughout, so no thread state of this
   interpreter is unlinked meanwhile (a thread unlinks its own while still
   holding it); Python code (a property, a finalizer) could let other
   threads run and end. */
static size_t
snapshot_live_threads(live_thread_t **out)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    size_t n = 0;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts != NULL; ts = PyThreadState_Next(ts)) {
        n++;
    }
    *out = PyMem_Malloc((n ? n : 1) * sizeof **out);
    if (*out == NULL) {
        return 0;
    }
    size_t i = 0;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts != NULL && i < n;
         ts = PyThreadState_Next(ts), i++) {
        (*out)[i].ts = ts;
        (*out)[i].ident = ts->thread_id;
        (*out)[i].dict = Py_XNewRef(ts->dict);
    }
    return i;
}

static void
release_live_threads(live_thread_t *live, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Py_XDECREF(live[i].dict);
    }
    PyMem_Free(live);
}

/* The name the thread gave itself (name_thread()), as UTF-8 valid while
   `thread` is, or NULL. No exception either way. */
static const char *
explicit_name(const live_thread_t *thread)
{
    PyObject *name = NULL;
    if (thread->dict == NULL || PyDict_GetItemStringRef(thread->dict, EXPLICIT_NAME_KEY, &name) <= 0) {
        PyErr_Clear();
        return NULL;
    }
    /* The dict keeps it alive as long as `thread` keeps the dict. */
    Py_DECREF(name);
    const char *utf8 = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    PyErr_Clear();
    return utf8;
}

/* Names every live thread of this interpreter (its records and trace
   rows), by ident: the name it gave itself, else the threading module's. */
static void
name_live_threads(gil_t *lock)
{
    PyObject *exc = PyErr_GetRaisedException();
    live_thread_t *live = NULL;
    size_t n = snapshot_live_threads(&live);
    PyObject *self_named = PySet_New(NULL);
    for (size_t i = 0; i < n; i++) {
        const char *utf8 = explicit_name(&live[i]);
        if (utf8 == NULL) {
            continue;
        }
        (void)gil_name_tagged(lock, (uint64_t)live[i].ident, 0, utf8);
        PyObject *ident = PyLong_FromUnsignedLong(live[i].ident);
        if (ident == NULL || self_named == NULL || PySet_Add(self_named, ident) < 0) {
            PyErr_Clear();
        }
        Py_XDECREF(ident);
    }
    if (live != NULL) {
        release_live_threads(live, n);
    }
    PyObject *modname = PyUnicode_FromString("threading");
    PyObject *threading = modname ? PyImport_GetModule(modname) : NULL;
    Py_XDECREF(modname);
    PyObject *active = threading ? PyObject_GetAttrString(threading, "_active") : NULL;
    Py_XDECREF(threading);
    PyObject *items = (active && PyDict_Check(active)) ? PyDict_Items(active) : NULL;
    Py_XDECREF(active);
    for (Py_ssize_t i = 0; items != NULL && i < PyList_GET_SIZE(items); i++) {
        PyObject *pair = PyList_GET_ITEM(items, i);
        if (self_named != NULL && PySet_Contains(self_named, PyTuple_GET_ITEM(pair, 0)) != 0) {
            PyErr_Clear();
            continue;
        }
        unsigned long long id = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(pair, 0));
        PyObject *name = PyObject_GetAttrString(PyTuple_GET_ITEM(pair, 1), "name");
        const char *utf8 = (name && PyUnicode_Check(name)) ? PyUnicode_AsUTF8(name) : NULL;
        if (utf8 != NULL && id != (unsigned long long)-1) {
            (void)gil_name_tagged(lock, (uint64_t)id, 0, utf8);
        }
        Py_XDECREF(name);
        PyErr_Clear();
    }
    Py_XDECREF(items);
    Py_XDECREF(self_named);
    PyErr_Clear();
    PyErr_SetRaisedException(exc);
}

static PyObject *
rustgil_at_exit(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = (gil_t *)_PyRustGil_Current();
    if (lock != NULL) {
        settle_pending_names(lock);
        name_live_threads(lock);
    }
    Py_RETURN_NONE;
}

static PyMethodDef rustgil_at_exit_def = {
    "_rustgil_name_threads_at_exit", rustgil_at_exit, METH_NOARGS, NULL,
};

static int
rustgil_audit(const char *event, PyObject *args, void *Py_UNUSED(data))
{
    if (rustgil_in_audit) {
        return 0;
    }
    gil_t *lock = (gil_t *)_PyRustGil_Current();
    if (lock == NULL) {
        return 0;
    }
    rustgil_in_audit = 1;
    PyObject *exc = PyErr_GetRaisedException();
    if (rustgil_npending > 0) {
        settle_pending_names(lock);
    }
    bool stats_on = false;
    if (strcmp(event, "_thread.start_joinable_thread") == 0 && PyTuple_Check(args) &&
        PyTuple_GET_SIZE(args) >= 3 && PyTuple_GET_ITEM(args, 2) != Py_None &&
        gil_get_thread_stats_enabled(lock, &stats_on) == GIL_OK && stats_on) {
        PyObject *thread = PyObject_GetAttrString(PyTuple_GET_ITEM(args, 0), "__self__");
        PyObject *name = thread ? PyObject_GetAttrString(thread, "name") : NULL;
        const char *utf8 = (name && PyUnicode_Check(name)) ? PyUnicode_AsUTF8(name) : NULL;
        size_t len = utf8 ? strlen(utf8) : 0;
        char *copy = utf8 ? PyMem_RawMalloc(len + 1) : NULL;
        if (copy != NULL) {
            memcpy(copy, utf8, len + 1);
            if (rustgil_npending == MAX_PENDING) {
                /* Threads that never took the GIL: forget the oldest. */
                Py_DECREF(rustgil_pending[0].handle);
                PyMem_RawFree(rustgil_pending[0].name);
                memmove(&rustgil_pending[0], &rustgil_pending[1], (MAX_PENDING - 1) * sizeof rustgil_pending[0]);
                rustgil_npending--;
            }
            rustgil_pending[rustgil_npending].handle = Py_NewRef(PyTuple_GET_ITEM(args, 2));
            rustgil_pending[rustgil_npending].name = copy;
            rustgil_pending[rustgil_npending].seen_ns = gil_now_ns();
            rustgil_npending++;
        }
        Py_XDECREF(name);
        Py_XDECREF(thread);
        PyErr_Clear();
        if (!rustgil_atexit_registered) {
            /* By now the interpreter runs user code: atexit can be imported. */
            rustgil_atexit_registered = 1;
            PyObject *atexit = PyImport_ImportModule("atexit");
            PyObject *func = PyCFunction_New(&rustgil_at_exit_def, NULL);
            PyObject *r = (atexit && func) ? PyObject_CallMethod(atexit, "register", "O", func) : NULL;
            Py_XDECREF(r);
            Py_XDECREF(func);
            Py_XDECREF(atexit);
            PyErr_Clear();
        }
    }
    PyErr_SetRaisedException(exc);
    rustgil_in_audit = 0;
    return 0;
}

/* The current interpreter's lock's settings, all in one record
   (gil_get_settings), into *s: 0, or -1 with an exception set. */
static int
current_settings(gil_settings_t *s)
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return -1;
    }
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    gil_result_t r = gil_get_settings(lock, s);
    if (r != GIL_OK) {
        lock_error("gil_get_settings", r);
        return -1;
    }
    return 0;
}

static PyObject *
rustgil_options(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_settings_t s;
    if (current_settings(&s) < 0) {
        return NULL;
    }
    if (s.options[0] == '\0') {
        /* -X rust_gil and PYTHON_RUST_GIL only build locks a text says. */
        PyErr_SetString(PyExc_RuntimeError, "rust-gil: no options text says this lock's settings");
        return NULL;
    }
    return PyUnicode_FromString(s.options);
}

/* dict[key] = value, taking the reference to value; -1 with an exception
   set if value is NULL (the call that made it failed) or the set fails. */
static int
set_owned(PyObject *dict, const char *key, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *
rustgil_settings(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_settings_t s;
    gil_t *lock = current_lock();
    if (lock == NULL || current_settings(&s) < 0) {
        return NULL;
    }
    PyObject *d = PyDict_New();
    const char *policy = gil_policy_name(s.policy);
    if (d == NULL ||
        set_owned(d, "options", s.options[0] != '\0' ? PyUnicode_FromString(s.options) : Py_NewRef(Py_None)) < 0 ||
        set_owned(d, "preset", s.preset != NULL ? PyUnicode_FromString(s.preset) : Py_NewRef(Py_None)) < 0 ||
        set_owned(d, "policy", policy != NULL ? PyUnicode_FromString(policy) : Py_NewRef(Py_None)) < 0 ||
        set_owned(d, "monitor", PyBool_FromLong(s.monitor)) < 0) {
        Py_XDECREF(d);
        return NULL;
    }
    /* Every number setting under its options key, as the library lists
       them: one it adds shows here with no change to this file. */
    const char *key;
    for (size_t i = 0; (key = gil_setting_key(i)) != NULL; i++) {
        uint64_t value;
        gil_result_t r = gil_get_setting(lock, key, &value);
        if (r != GIL_OK) {
            lock_error("gil_get_setting", r);
            Py_DECREF(d);
            return NULL;
        }
        if (set_owned(d, key, PyLong_FromUnsignedLongLong(value)) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static PyObject *
rustgil_policy(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_settings_t s;
    if (current_settings(&s) < 0) {
        return NULL;
    }
    const char *name = s.preset;
    if (name == NULL) {
        /* -X rust_gil and PYTHON_RUST_GIL only name presets, so this lock
           was made some other way. */
        PyErr_SetString(PyExc_RuntimeError, "rust-gil: this lock's configuration is no preset");
        return NULL;
    }
    return PyUnicode_FromString(name);
}

static PyObject *
rustgil_switch_interval(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_settings_t s;
    if (current_settings(&s) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble((double)s.switch_interval_us / 1e6);
}

static PyObject *
rustgil_lazy_release(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_settings_t s;
    if (current_settings(&s) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble((double)s.lazy_release_us / 1e6);
}

static PyObject *
rustgil_presets(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    size_t n = 0;
    while (gil_preset_name(n) != NULL) {
        n++;
    }
    PyObject *names = PyTuple_New((Py_ssize_t)n);
    if (names == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *name = PyUnicode_FromString(gil_preset_name(i));
        if (name == NULL) {
            Py_DECREF(names);
            return NULL;
        }
        PyTuple_SET_ITEM(names, (Py_ssize_t)i, name);
    }
    return names;
}

static PyObject *
rustgil_spin(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_settings_t s;
    if (current_settings(&s) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble((double)s.spin_us / 1e6);
}

static PyObject *
rustgil_laps(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_settings_t s;
    if (current_settings(&s) < 0) {
        return NULL;
    }
    return PyLong_FromUnsignedLong(s.laps);
}

static PyObject *
rustgil_monitor(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_settings_t s;
    if (current_settings(&s) < 0) {
        return NULL;
    }
    return PyBool_FromLong(s.monitor);
}

static PyObject *
rustgil_monitor_wakeups(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(gil_monitor_wakeups());
}

static int
set_u64(PyObject *dict, const char *key, uint64_t value)
{
    PyObject *v = PyLong_FromUnsignedLongLong(value);
    if (v == NULL) {
        return -1;
    }
    int rc = PyDict_SetItemString(dict, key, v);
    Py_DECREF(v);
    return rc;
}

/* The counters into a new dict, or NULL with an exception set. */
static PyObject *
counters_dict(gil_t *lock)
{
    gil_counters_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    gil_result_t r = gil_get_counters(lock, &c);
    if (r != GIL_OK) {
        return lock_error("gil_get_counters", r);
    }
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    if (set_u64(d, "acquisitions", c.acquisitions) < 0 || set_u64(d, "switches", c.switches) < 0 ||
        set_u64(d, "drop_requests", c.drop_requests) < 0 ||
        set_u64(d, "forced_switches", c.forced_switches) < 0 || set_u64(d, "wait_ns", c.wait_ns) < 0 ||
        set_u64(d, "preemptions", c.preemptions) < 0 || set_u64(d, "lazy_releases", c.lazy_releases) < 0 ||
        set_u64(d, "lazy_takeovers", c.lazy_takeovers) < 0 ||
        set_u64(d, "starvation_promotions", c.starvation_promotions) < 0 ||
        set_u64(d, "cpu_spin_takes", c.cpu_spin_takes) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *
rustgil_counters(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    return lock == NULL ? NULL : counters_dict(lock);
}

static PyObject *
histogram_list(const uint64_t *buckets, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(buckets[i]);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, v);
    }
    return list;
}

static PyObject *
rustgil_stats(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    gil_histograms_t h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    gil_result_t r = gil_get_histograms(lock, &h);
    if (r != GIL_OK) {
        return lock_error("gil_get_histograms", r);
    }
    bool enabled = false;
    r = gil_get_histograms_enabled(lock, &enabled);
    if (r != GIL_OK) {
        return lock_error("gil_get_histograms_enabled", r);
    }
    PyObject *d = counters_dict(lock);
    if (d == NULL) {
        return NULL;
    }
    if (set_owned(d, "histograms_enabled", PyBool_FromLong(enabled)) < 0 ||
        set_owned(d, "wait_histogram", histogram_list(h.wait, GIL_HISTOGRAM_BUCKETS)) < 0 ||
        set_owned(d, "hold_histogram", histogram_list(h.hold, GIL_HISTOGRAM_BUCKETS)) < 0 ||
        set_owned(d, "wait_histogram_fine", histogram_list(h.wait_fine, GIL_HISTOGRAM_FINE_BUCKETS)) < 0 ||
        set_owned(d, "hold_histogram_fine", histogram_list(h.hold_fine, GIL_HISTOGRAM_FINE_BUCKETS)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* ---- per-thread accounting --------------------------------------------- */

/* Tags the calling thread's record with its ident, as take_gil does. A
   thread holding the GIL when the accounting goes on has no record until
   its next lock event, which a CPU-bound block may never have; tagging it
   begins its record now, in the holding state, so measure() and
   thread_stats() count from here. With no record to tag (the accounting is
   off) nothing changes. */
static void
tag_current_thread(gil_t *lock)
{
    PyThreadState *ts = PyThreadState_Get();
    (void)gil_tag_thread(lock, ts, (uint64_t)ts->thread_id);
}

static PyObject *
rustgil_set_thread_stats(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"on", NULL};
    int on = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:set_thread_stats", keywords, &on)) {
        return NULL;
    }
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    gil_result_t r = gil_set_thread_stats(lock, on != 0);
    if (r != GIL_OK) {
        return lock_error("gil_set_thread_stats", r);
    }
    if (trace_turned_stats_on == lock) {
        trace_turned_stats_on = NULL;  /* the user's choice now, not the trace's */
    }
    if (on && _PyRustGil_StartNaming() < 0) {
        PyErr_Clear();  /* names are a nicety */
    }
    if (on) {
        tag_current_thread(lock);
    }
    Py_RETURN_NONE;
}

static PyObject *
rustgil_thread_stats_enabled(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    bool on = false;
    gil_result_t r = gil_get_thread_stats_enabled(lock, &on);
    if (r != GIL_OK) {
        return lock_error("gil_get_thread_stats_enabled", r);
    }
    return PyBool_FromLong(on);
}

/* The fields of a gil_thread_stats_t that measure() differences and
   thread_stats() reports, in that order. */
#define RUSTGIL_STAT_FIELDS(X)                                                 \
    X(wait_ns) X(hold_ns) X(call_ns) X(acquisitions) X(switches_in) X(waits)   \
    X(forced_releases) X(drop_requests_raised) X(drop_requests_received)

static PyObject *
stats_dict(const gil_thread_stats_t *t, PyObject *name)
{
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    if (PyDict_SetItemString(d, "name", name) < 0 || set_owned(d, "alive", PyBool_FromLong(t->alive)) < 0) {
        goto fail;
    }
#define SET_FIELD(f) if (set_u64(d, #f, t->f) < 0) goto fail;
    RUSTGIL_STAT_FIELDS(SET_FIELD)
#undef SET_FIELD
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

struct collect {
    PyObject *dict;      /* ident -> stats dict */
    PyObject *alive;     /* idents whose entry is a live thread */
    int failed;
};

static int
collect_stats(void *user_data, const gil_thread_stats_t *t)
{
    struct collect *c = user_data;
    if (t->tag == 0) {
        return 0;  /* never tagged: no ident to key it by */
    }
    PyObject *key = PyLong_FromUnsignedLongLong(t->tag);
    if (key == NULL) {
        c->failed = 1;
        return 1;
    }
    /* An ident reused by a later thread: the latest live record, else the
       latest (records come oldest first), as gil_name_tagged chooses. */
    int have_live = PySet_Contains(c->alive, key);
    PyObject *name = t->name ? PyUnicode_DecodeUTF8(t->name, (Py_ssize_t)strlen(t->name), "replace")
                             : Py_NewRef(Py_None);
    PyObject *value = name ? stats_dict(t, name) : NULL;
    Py_XDECREF(name);
    int rc = value == NULL || have_live < 0 ? -1 : 0;
    if (rc == 0 && (t->alive || !have_live)) {
        rc = PyDict_SetItem(c->dict, key, value);
        if (rc == 0 && t->alive) {
            rc = PySet_Add(c->alive, key);
        }
    }
    Py_XDECREF(value);
    Py_DECREF(key);
    if (rc < 0) {
        c->failed = 1;
        return 1;
    }
    return 0;
}

static PyObject *
rustgil_thread_stats(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    settle_pending_names(lock);
    name_live_threads(lock);
    struct collect c = {PyDict_New(), PySet_New(NULL), 0};
    if (c.dict == NULL || c.alive == NULL) {
        goto fail;
    }
    gil_result_t r = gil_foreach_thread_stats(lock, collect_stats, &c);
    if (r != GIL_OK) {
        lock_error("gil_foreach_thread_stats", r);
        goto fail;
    }
    if (c.failed) {
        goto fail;
    }
    Py_DECREF(c.alive);
    return c.dict;
fail:
    Py_XDECREF(c.dict);
    Py_XDECREF(c.alive);
    return NULL;
}

static PyObject *
rustgil_name_thread(PyObject *module, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "name_thread() argument must be str, not %T", arg);
        return NULL;
    }
    Py_ssize_t len = 0;
    const char *name = PyUnicode_AsUTF8AndSize(arg, &len);
    if (name == NULL) {
        return NULL;
    }
    if (strlen(name) != (size_t)len) {
        PyErr_SetString(PyExc_ValueError, "name_thread(): embedded null character");
        return NULL;
    }
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    PyObject *dict = PyThreadState_GetDict();
    if (dict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "name_thread(): this thread has no state dict");
        return NULL;
    }
    if (PyDict_SetItemString(dict, EXPLICIT_NAME_KEY, arg) < 0) {
        return NULL;
    }
    PyThreadState *ts = PyThreadState_Get();
    forget_pending_name(lock, ts->thread_id);
    tag_current_thread(lock);
    gil_result_t r = gil_name_thread(lock, ts, name);
    /* No record to name (the accounting is off, or the thread has had no
       lock event since it went on): the name is kept above and given at
       the next thread_stats(), trace_stop() or exit. */
    if (r != GIL_OK && r != GIL_ERR_UNKNOWN_THREAD) {
        return lock_error("gil_name_thread", r);
    }
    Py_RETURN_NONE;
}

/* measure(): a context manager over the calling thread's record. */
typedef struct {
    PyObject_HEAD
    gil_thread_stats_t start;
    int entered;
#define DECLARE_FIELD(f) unsigned long long f;
    RUSTGIL_STAT_FIELDS(DECLARE_FIELD)
#undef DECLARE_FIELD
} MeasureObject;

/* The calling thread's record now; zeros if it has none yet. With `begin`,
   the record begins now if it has none (tag_current_thread). -1 with an
   exception if accounting is off. */
static int
current_thread_stats(gil_t *lock, gil_thread_stats_t *out, int begin)
{
    bool on = false;
    gil_result_t r = gil_get_thread_stats_enabled(lock, &on);
    if (r != GIL_OK) {
        lock_error("gil_get_thread_stats_enabled", r);
        return -1;
    }
    if (!on) {
        PyErr_SetString(PyExc_RuntimeError, "per-thread GIL accounting is off: turn it on with "
                        "_rustgil.set_thread_stats() or PYTHON_RUST_GIL=POLICY,stats=1");
        return -1;
    }
    if (begin) {
        tag_current_thread(lock);
    }
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    r = gil_get_thread_stats(lock, PyThreadState_Get(), out);
    if (r == GIL_ERR_UNKNOWN_THREAD) {
        memset(out, 0, sizeof *out);
        return 0;
    }
    if (r != GIL_OK) {
        lock_error("gil_get_thread_stats", r);
        return -1;
    }
    return 0;
}

static PyObject *
measure_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    MeasureObject *self = (MeasureObject *)op;
    gil_t *lock = current_lock();
    if (lock == NULL || current_thread_stats(lock, &self->start, 1) < 0) {
        return NULL;
    }
    self->entered = 1;
    return Py_NewRef(op);
}

static PyObject *
measure_exit(PyObject *op, PyObject *Py_UNUSED(args))
{
    MeasureObject *self = (MeasureObject *)op;
    gil_thread_stats_t now;
    gil_t *lock = current_lock();
    if (!self->entered) {
        PyErr_SetString(PyExc_RuntimeError, "measure: __exit__ without __enter__");
        return NULL;
    }
    if (lock == NULL || current_thread_stats(lock, &now, 0) < 0) {
        return NULL;
    }
    self->entered = 0;
    /* A record that began inside the block counts from its start. */
    const gil_thread_stats_t *from = (now.first_ns == self->start.first_ns) ? &self->start : NULL;
#define DIFF_FIELD(f) self->f = now.f - (from ? from->f : 0);
    RUSTGIL_STAT_FIELDS(DIFF_FIELD)
#undef DIFF_FIELD
    Py_RETURN_FALSE;
}

static PyObject *
measure_repr(PyObject *op)
{
    MeasureObject *self = (MeasureObject *)op;
    return PyUnicode_FromFormat("<_rustgil.measure wait_ns=%llu hold_ns=%llu call_ns=%llu acquisitions=%llu>",
                                self->wait_ns, self->hold_ns, self->call_ns, self->acquisitions);
}

static PyMethodDef measure_methods[] = {
    {"__enter__", measure_enter, METH_NOARGS, NULL},
    {"__exit__", measure_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef measure_members[] = {
#define MEMBER(f) {#f, Py_T_ULONGLONG, offsetof(MeasureObject, f), Py_READONLY, NULL},
    RUSTGIL_STAT_FIELDS(MEMBER)
#undef MEMBER
    {NULL, 0, 0, 0, NULL},
};

static void
measure_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    tp->tp_free(op);
    Py_DECREF(tp);  /* instances of heap types own a reference to it */
}

static PyType_Slot measure_slots[] = {
    {Py_tp_dealloc, measure_dealloc},
    {Py_tp_doc, (void *)"measure()\n--\n\n"
                "A context manager measuring the calling thread's GIL time inside a\n"
                "block: after it, wait_ns, hold_ns, call_ns (released around calls),\n"
                "acquisitions, switches_in, waits, forced_releases,\n"
                "drop_requests_raised and drop_requests_received hold what the block\n"
                "added. Needs per-thread accounting on (set_thread_stats() or\n"
                "PYTHON_RUST_GIL=POLICY,stats=1)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_repr, measure_repr},
    {Py_tp_methods, measure_methods},
    {Py_tp_members, measure_members},
    {0, NULL},
};

/* A heap type, made per interpreter: this module supports interpreters
   with their own GIL. */
static PyType_Spec measure_spec = {
    .name = "_rustgil.measure",
    .basicsize = sizeof(MeasureObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = measure_slots,
};

static PyObject *
rustgil_enable_histograms(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"on", NULL};
    int on = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:enable_histograms", keywords, &on)) {
        return NULL;
    }
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    gil_result_t r = gil_set_histograms(lock, on != 0);
    if (r != GIL_OK) {
        return lock_error("gil_set_histograms", r);
    }
    Py_RETURN_NONE;
}

static PyObject *
rustgil_reset_histograms(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    gil_result_t r = gil_reset_histograms(lock);
    if (r != GIL_OK) {
        return lock_error("gil_reset_histograms", r);
    }
    Py_RETURN_NONE;
}

/* The OSError for a trace file the library could not create, its subclass
   picked by the errno of looking (never opening: the name may be a FIFO,
   a device or a link the library refused): what the name holds, then its
   directory. */
static void
trace_file_error(PyObject *path, const char *p)
{
    struct stat st;
    if (lstat(p, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            errno = EISDIR;
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        }
        else if (!S_ISREG(st.st_mode)) {
            PyErr_Format(PyExc_OSError, "trace file %R is %s: a trace replaces only a regular file, "
                         "or creates a missing one", path,
                         S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? "a device" : "not a regular file");
        }
        else {
            PyErr_Format(PyExc_OSError, "cannot replace the trace file %R", path);
        }
        return;
    }
    if (errno != ENOENT) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        return;
    }
    const char *slash = strrchr(p, '/');
    PyObject *dir = slash == NULL ? PyBytes_FromString(".")
                    : PyBytes_FromStringAndSize(p, slash == p ? 1 : slash - p);
    if (dir == NULL) {
        return;
    }
    const char *d = PyBytes_AS_STRING(dir);
    int failed = stat(d, &st) != 0;
    if (!failed && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        failed = 1;
    }
    if (!failed && access(d, W_OK | X_OK) != 0) {
        failed = 1;
    }
    if (failed) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
    }
    else {
        PyErr_Format(PyExc_OSError, "cannot create the trace file %R", path);
    }
    Py_DECREF(dir);
}

static PyObject *
rustgil_trace_start(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"path", "title", "max_events", "ring", NULL};
    PyObject *path = NULL;
    const char *title = NULL;
    Py_ssize_t max_events = 0;
    int ring = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|zn$p:trace_start", keywords, PyUnicode_FSConverter,
                                     &path, &title, &max_events, &ring)) {
        return NULL;
    }
    PyObject *result = NULL;
    gil_t *lock = current_lock();
    const char *p = PyBytes_AS_STRING(path);
    if (lock == NULL) {
        goto done;
    }
    if (max_events < 0) {
        PyErr_SetString(PyExc_ValueError, "max_events must be >= 0 (0: the library's default)");
        goto done;
    }
    char default_title[GIL_OPTIONS_TEXT_MAX + 100];
    if (title == NULL) {
        /* The options text the lock is: the trace's figure can be made
           again from its title. */
        gil_settings_t s;
        if (current_settings(&s) < 0) {
            goto done;
        }
        snprintf(default_title, sizeof default_title, "Python %s, GIL options %s", PY_VERSION,
                 s.options[0] != '\0' ? s.options : "?");
        title = default_title;
    }
    gil_result_t r = gil_trace_start_ex(lock, p, title, (size_t)max_events, ring ? GIL_TRACE_RING : 0);
    if (r == GIL_ERR_BUSY) {
        PyErr_SetString(PyExc_RuntimeError, "a GIL trace is already running in this interpreter");
        goto done;
    }
    if (r == GIL_ERR_INVALID_ARGUMENT) {
        /* max_events and the flags are checked: the library refused the
           name (its one rule for a trace name's format). */
        PyErr_Format(PyExc_ValueError, "trace file %R: the name must end in .json (Chrome trace "
                     "events, for Perfetto) or .svg (a timeline picture), after a file name", path);
        goto done;
    }
    if (r == GIL_ERR_IO) {
        trace_file_error(path, p);
        goto done;
    }
    if (r != GIL_OK) {
        lock_error("gil_trace_start", r);
        goto done;
    }
    /* The rows are named through the accounting's records (tagged with
       each thread's ident): on while the trace runs. */
    bool stats_on = true;
    if (gil_get_thread_stats_enabled(lock, &stats_on) == GIL_OK && !stats_on &&
        gil_set_thread_stats(lock, true) == GIL_OK) {
        trace_turned_stats_on = lock;
        tag_current_thread(lock);
    }
    if (_PyRustGil_StartNaming() < 0) {
        PyErr_Clear();  /* names are a nicety */
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(path);
    return result;
}

/* Names the trace's rows after this interpreter's live threads: the name
   a thread gave itself (name_thread()), else the threading module's name
   where it knows the thread, else its ident. Names are a nicety: nothing
   here makes trace_stop() fail. */
static void
name_trace_rows(gil_t *lock)
{
    PyObject *exc = PyErr_GetRaisedException();
    live_thread_t *live = NULL;
    size_t n = snapshot_live_threads(&live);
    PyObject *active = NULL;
    PyObject *modname = PyUnicode_FromString("threading");
    PyObject *threading = modname ? PyImport_GetModule(modname) : NULL;
    Py_XDECREF(modname);
    if (threading != NULL) {
        active = PyObject_GetAttrString(threading, "_active");
        Py_DECREF(threading);
    }
    PyErr_Clear();
    for (size_t i = 0; i < n; i++) {
        char name[160];
        snprintf(name, sizeof name, "thread %lu", live[i].ident);
        const char *mine = explicit_name(&live[i]);
        if (mine != NULL) {
            (void)gil_trace_name_thread(lock, live[i].ts, mine);
            continue;
        }
        if (active != NULL && PyDict_Check(active)) {
            PyObject *ident = PyLong_FromUnsignedLong(live[i].ident);
            PyObject *thread = ident ? PyDict_GetItemWithError(active, ident) : NULL; /* borrowed */
            Py_XINCREF(thread);
            Py_XDECREF(ident);
            PyObject *pyname = thread ? PyObject_GetAttrString(thread, "name") : NULL;
            Py_XDECREF(thread);
            const char *utf8 = (pyname && PyUnicode_Check(pyname)) ? PyUnicode_AsUTF8(pyname) : NULL;
            if (utf8 != NULL) {
                /* The library shows a name cut inside a character as a
                   replacement character. */
                snprintf(name, sizeof name, "%.120s (%lu)", utf8, live[i].ident);
            }
            Py_XDECREF(pyname);
            PyErr_Clear();
        }
        (void)gil_trace_name_thread(lock, live[i].ts, name);
    }
    Py_XDECREF(active);
    if (live != NULL) {
        release_live_threads(live, n);
    }
    PyErr_SetRaisedException(exc);
}

static PyObject *
rustgil_trace_stop(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    settle_pending_names(lock);
    name_trace_rows(lock);
    uint64_t events = 0;
    gil_result_t r;
    /* Writing a long trace takes a while: let other threads run. */
    Py_BEGIN_ALLOW_THREADS
    r = gil_trace_stop(lock, &events);
    Py_END_ALLOW_THREADS
    if (r == GIL_ERR_NOT_TRACING) {
        PyErr_SetString(PyExc_RuntimeError, "no GIL trace is running in this interpreter");
        return NULL;
    }
    if (trace_turned_stats_on == lock) {
        trace_turned_stats_on = NULL;
        (void)gil_set_thread_stats(lock, false);
    }
    if (r == GIL_ERR_IO) {
        PyErr_SetString(PyExc_OSError, "the GIL trace could not be written to its file");
        return NULL;
    }
    if (r != GIL_OK) {
        return lock_error("gil_trace_stop", r);
    }
    return PyLong_FromUnsignedLongLong(events);
}

static PyMethodDef rustgil_methods[] = {
    {"options", rustgil_options, METH_NOARGS,
     "options()\n--\n\nThe options text the current interpreter's GIL is, e.g. 'priority,spin_us=50':\n"
     "what PYTHON_RUST_GIL takes to build the same lock again, on any host."},
    {"settings", rustgil_settings, METH_NOARGS,
     "settings()\n--\n\nAll the GIL's settings, as a dict: options, preset, policy,\n"
     "monitor, and each number setting under its options key: interval_us,\n"
     "lazy_us (0 when off), spin_us, laps."},
    {"policy", rustgil_policy, METH_NOARGS,
     "policy()\n--\n\nThe GIL's preset name; options() says what is set on top of it."},
    {"switch_interval", rustgil_switch_interval, METH_NOARGS,
     "switch_interval()\n--\n\nThe switch interval in seconds, as the library holds it: that of\n"
     "sys.getswitchinterval(), capped at the library's maximum of one hour."},
    {"lazy_release", rustgil_lazy_release, METH_NOARGS,
     "lazy_release()\n--\n\nThe lazy-release threshold in seconds (0.0: lazy release is off)."},
    {"presets", rustgil_presets, METH_NOARGS,
     "presets()\n--\n\nThe policy names -X rust_gil and PYTHON_RUST_GIL accept."},
    {"spin", rustgil_spin, METH_NOARGS,
     "spin()\n--\n\nThe bounded spin before sleeping, in seconds (0.0: off)."},
    {"laps", rustgil_laps, METH_NOARGS,
     "laps()\n--\n\nHow many times a running thread may take the lock past the first waiter\n"
     "in line (PYTHON_RUST_GIL=...,laps=N); 0: no bound."},
    {"monitor", rustgil_monitor, METH_NOARGS,
     "monitor()\n--\n\nWhether the process's monitor thread keeps this GIL's time."},
    {"monitor_wakeups", rustgil_monitor_wakeups, METH_NOARGS,
     "monitor_wakeups()\n--\n\nHow many times the process's monitor thread has woken up."},
    {"counters", rustgil_counters, METH_NOARGS,
     "counters()\n--\n\nThe current interpreter's GIL counters: acquisitions, switches,\n"
     "drop_requests, forced_switches, wait_ns, preemptions, lazy_releases,\n"
     "lazy_takeovers, starvation_promotions, cpu_spin_takes."},
    {"stats", rustgil_stats, METH_NOARGS,
     "stats()\n--\n\nThe counters, plus histograms_enabled and wait_histogram /\n"
     "hold_histogram: 64 counts each, bucket i counting [2**i, 2**(i+1)) ns;\n"
     "wait_histogram_fine / hold_histogram_fine: 496 counts each, bucket i\n"
     "counting [i, i+1) ns below 8, above that eight per power of two\n"
     "(bucket 8 + 8*(p-3) + k counts [(8+k) * 2**(p-3), (9+k) * 2**(p-3)) ns)."},
    {"set_thread_stats", (PyCFunction)(void (*)(void))rustgil_set_thread_stats, METH_VARARGS | METH_KEYWORDS,
     "set_thread_stats(on=True)\n--\n\nTurns per-thread GIL accounting on or off (off by default; off it\n"
     "costs nothing)."},
    {"thread_stats_enabled", rustgil_thread_stats_enabled, METH_NOARGS,
     "thread_stats_enabled()\n--\n\nWhether per-thread GIL accounting is on."},
    {"thread_stats", rustgil_thread_stats, METH_NOARGS,
     "thread_stats()\n--\n\nEach thread's GIL accounting, keyed by thread ident: a dict with name\n"
     "(name_thread()'s, else threading's, or None), alive, wait_ns,\n"
     "hold_ns, call_ns (released around blocking calls), acquisitions,\n"
     "switches_in, waits, forced_releases, drop_requests_raised,\n"
     "drop_requests_received.\n"
     "Threads that ended are kept (the last 1024); for an ident reused by\n"
     "a later thread, the live or latest one."},
    {"name_thread", rustgil_name_thread, METH_O,
     "name_thread(name)\n--\n\nNames the calling thread in the accounting and the running trace for\n"
     "the rest of its life: the name wins over the threading module's, which\n"
     "thread_stats() and trace_stop() give the other threads; a later call\n"
     "replaces it."},
    {"enable_histograms", (PyCFunction)(void (*)(void))rustgil_enable_histograms,
     METH_VARARGS | METH_KEYWORDS,
     "enable_histograms(on=True)\n--\n\nTurns the wait/hold-time histograms on or off."},
    {"reset_histograms", rustgil_reset_histograms, METH_NOARGS,
     "reset_histograms()\n--\n\nEmpties the wait/hold-time histograms."},
    {"trace_start", (PyCFunction)(void (*)(void))rustgil_trace_start, METH_VARARGS | METH_KEYWORDS,
     "trace_start(path, title=None, max_events=0, *, ring=False)\n--\n\n"
     "Starts recording this interpreter's GIL events. path must end in .json\n"
     "(Chrome trace events: open it in ui.perfetto.dev) or .svg (a timeline:\n"
     "one row per thread, running / waiting / in a system call). The file\n"
     "is created now and written by trace_stop(). At most max_events\n"
     "events are kept (0: about a million): the first ones, or with\n"
     "ring=True the last ones."},
    {"trace_stop", rustgil_trace_stop, METH_NOARGS,
     "trace_stop()\n--\n\nStops the trace, names its rows after the live threads,\n"
     "writes the file and returns the number of events."},
    {NULL, NULL, 0, NULL},
};

static int
rustgil_exec(PyObject *module)
{
    if (PyInterpreterState_Get() == PyInterpreterState_Main()) {
        _PyRustGil_SetNamer(rustgil_audit);
    }
    PyObject *measure = PyType_FromModuleAndSpec(module, &measure_spec, NULL);
    if (measure == NULL) {
        return -1;
    }
    int rc = PyModule_AddType(module, (PyTypeObject *)measure);
    Py_DECREF(measure);
    if (rc < 0) {
        return -1;
    }
    return PyModule_AddStringConstant(module, "version", gil_version());
}

static PyModuleDef_Slot rustgil_slots[] = {
    {Py_mod_exec, rustgil_exec},
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
    {Py_mod_gil, Py_MOD_GIL_USED},
    {0, NULL},
};

static struct PyModuleDef rustgil_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_rustgil",
    .m_doc = "The rust-gil library behind this interpreter's GIL.",
    .m_size = 0,
    .m_methods = rustgil_methods,
    .m_slots = rustgil_slots,
};

PyMODINIT_FUNC
PyInit__rustgil(void)
{
    return PyModuleDef_Init(&rustgil_module);
}
