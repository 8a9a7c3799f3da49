/*
 * _rustgil: the rust-gil library as seen from Python, in interpreters built
 * --with-rust-gil. Maintained in the rust-gil repository (cpython/shim/);
 * the CPython patch carries it as a new file (scripts/gen-cpython-patch.sh),
 * and configure --with-rust-gil builds it in (PY_STDLIB_MOD,
 * Modules/Setup.stdlib.in).
 *
 *   _rustgil.version           the library's version (str)
 *   _rustgil.policy()          this interpreter's GIL policy: the preset
 *                              name (classic, priority, lazy, priority-lazy,
 *                              monitor, priority-monitor,
 *                              priority-lazy-monitor)
 *   _rustgil.presets()         the policy names -X rust_gil and
 *                              PYTHON_RUST_GIL accept (a tuple)
 *   _rustgil.lazy_release()    the lazy-release threshold in seconds, 0.0
 *                              when off
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
 *                              starvation_promotions
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
 */
#ifndef Py_BUILD_CORE_BUILTIN
#  define Py_BUILD_CORE_MODULE 1
#endif

#include "Python.h"
#include <gil.h>
#include <fcntl.h>               /* open */
#include <strings.h>             /* strcasecmp */
#include <unistd.h>              /* close */

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

static PyObject *
rustgil_policy(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    const char *name = NULL;
    gil_result_t r = gil_get_preset(lock, &name);
    if (r != GIL_OK) {
        return lock_error("gil_get_preset", r);
    }
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
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    uint64_t us;
    gil_result_t r = gil_get_switch_interval(lock, &us);
    if (r != GIL_OK) {
        return lock_error("gil_get_switch_interval", r);
    }
    return PyFloat_FromDouble((double)us / 1e6);
}

static PyObject *
rustgil_lazy_release(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    uint64_t us;
    gil_result_t r = gil_get_lazy_release(lock, &us);
    if (r != GIL_OK) {
        return lock_error("gil_get_lazy_release", r);
    }
    return PyFloat_FromDouble((double)us / 1e6);
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
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    uint64_t us;
    gil_result_t r = gil_get_spin(lock, &us);
    if (r != GIL_OK) {
        return lock_error("gil_get_spin", r);
    }
    return PyFloat_FromDouble((double)us / 1e6);
}

static PyObject *
rustgil_laps(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    uint32_t laps;
    gil_result_t r = gil_get_laps(lock, &laps);
    if (r != GIL_OK) {
        return lock_error("gil_get_laps", r);
    }
    return PyLong_FromUnsignedLong(laps);
}

static PyObject *
rustgil_monitor(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
    bool monitor;
    gil_result_t r = gil_get_monitor(lock, &monitor);
    if (r != GIL_OK) {
        return lock_error("gil_get_monitor", r);
    }
    return PyBool_FromLong(monitor);
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
        set_u64(d, "starvation_promotions", c.starvation_promotions) < 0) {
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
histogram_list(const uint64_t *buckets)
{
    PyObject *list = PyList_New(GIL_HISTOGRAM_BUCKETS);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < GIL_HISTOGRAM_BUCKETS; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(buckets[i]);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, v);
    }
    return list;
}

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
        set_owned(d, "wait_histogram", histogram_list(h.wait)) < 0 ||
        set_owned(d, "hold_histogram", histogram_list(h.hold)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

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

static PyObject *
rustgil_trace_start(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"path", "title", "max_events", NULL};
    PyObject *path = NULL;
    const char *title = NULL;
    Py_ssize_t max_events = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|zn:trace_start", keywords, PyUnicode_FSConverter,
                                     &path, &title, &max_events)) {
        return NULL;
    }
    PyObject *result = NULL;
    gil_t *lock = current_lock();
    const char *p = PyBytes_AS_STRING(path);
    size_t len = strlen(p);
    if (lock == NULL) {
        goto done;
    }
    if (max_events < 0) {
        PyErr_SetString(PyExc_ValueError, "max_events must be >= 0 (0: the library's default)");
        goto done;
    }
    if (!((len > 5 && strcasecmp(p + len - 5, ".json") == 0) || (len > 4 && strcasecmp(p + len - 4, ".svg") == 0))) {
        PyErr_Format(PyExc_ValueError, "trace file %R: the name must end in .json (Chrome trace "
                     "events, for Perfetto) or .svg (a timeline picture)", path);
        goto done;
    }
    char default_title[160];
    if (title == NULL) {
        PyObject *policy = rustgil_policy(module, NULL);
        if (policy == NULL) {
            goto done;
        }
        const char *name = PyUnicode_AsUTF8(policy);
        snprintf(default_title, sizeof default_title, "Python %s, GIL policy %s", PY_VERSION, name ? name : "?");
        Py_DECREF(policy);
        PyErr_Clear();
        title = default_title;
    }
    gil_result_t r = gil_trace_start(lock, p, title, (size_t)max_events);
    if (r == GIL_ERR_BUSY) {
        PyErr_SetString(PyExc_RuntimeError, "a GIL trace is already running in this interpreter");
        goto done;
    }
    if (r == GIL_ERR_IO) {
        /* The library could not create it: ask again, for the errno that
           picks the OSError subclass (FileNotFoundError, PermissionError). */
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        if (fd >= 0) {
            close(fd);
            PyErr_Format(PyExc_OSError, "cannot create the trace file %R", path);
        }
        else {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        }
        goto done;
    }
    if (r != GIL_OK) {
        lock_error("gil_trace_start", r);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(path);
    return result;
}

/* Names the trace's rows after this interpreter's live threads: the
   threading module's name where it knows the thread, else its ident.
   Names are a nicety: nothing here makes trace_stop() fail. */
static void
name_trace_rows(gil_t *lock)
{
    /* First the thread states and their idents, running no Python code: the
       GIL is held throughout, so no thread state of this interpreter is
       unlinked meanwhile (a thread unlinks its own while still holding it).
       Python code (a property, a finalizer) could let other threads run. */
    enum { MAX_NAMED = 256 };
    struct { PyThreadState *ts; unsigned long ident; } live[MAX_NAMED];
    size_t n = 0;
    PyInterpreterState *interp = PyInterpreterState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts != NULL && n < MAX_NAMED;
         ts = PyThreadState_Next(ts)) {
        live[n].ts = ts;
        live[n].ident = ts->thread_id;
        n++;
    }
    PyObject *exc = PyErr_GetRaisedException();
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
    PyErr_SetRaisedException(exc);
}

static PyObject *
rustgil_trace_stop(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
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
    {"policy", rustgil_policy, METH_NOARGS, "policy()\n--\n\nThe GIL policy of the current interpreter."},
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
     "lazy_takeovers, starvation_promotions."},
    {"stats", rustgil_stats, METH_NOARGS,
     "stats()\n--\n\nThe counters, plus histograms_enabled and wait_histogram /\n"
     "hold_histogram: 64 counts each, bucket i counting [2**i, 2**(i+1)) ns."},
    {"enable_histograms", (PyCFunction)(void (*)(void))rustgil_enable_histograms,
     METH_VARARGS | METH_KEYWORDS,
     "enable_histograms(on=True)\n--\n\nTurns the wait/hold-time histograms on or off."},
    {"reset_histograms", rustgil_reset_histograms, METH_NOARGS,
     "reset_histograms()\n--\n\nEmpties the wait/hold-time histograms."},
    {"trace_start", (PyCFunction)(void (*)(void))rustgil_trace_start, METH_VARARGS | METH_KEYWORDS,
     "trace_start(path, title=None, max_events=0)\n--\n\n"
     "Starts recording this interpreter's GIL events. path must end in .json\n"
     "(Chrome trace events: open it in ui.perfetto.dev) or .svg (a timeline:\n"
     "one row per thread, running / waiting / in a system call). The file\n"
     "is created now and written by trace_stop(). At most max_events\n"
     "events are kept (0: about a million)."},
    {"trace_stop", rustgil_trace_stop, METH_NOARGS,
     "trace_stop()\n--\n\nStops the trace, names its rows after the live threads,\n"
     "writes the file and returns the number of events."},
    {NULL, NULL, 0, NULL},
};

static int
rustgil_exec(PyObject *module)
{
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
