/*
 * _rustgil: the rust-gil library as seen from Python, in interpreters built
 * --with-rust-gil. Maintained in the rust-gil repository (cpython/shim/);
 * cpython/build.sh copies it to Modules/ and builds it in (Modules/Setup.local).
 *
 *   _rustgil.version           the library's version (str)
 *   _rustgil.policy()          this interpreter's GIL policy: the preset
 *                              name (classic, priority, lazy, priority-lazy)
 *   _rustgil.lazy_release()    the lazy-release threshold in seconds, 0.0
 *                              when off
 *   _rustgil.switch_interval() the switch interval in seconds (float)
 *   _rustgil.counters()        dict: acquisitions, switches, drop_requests,
 *                              forced_switches, wait_ns, preemptions,
 *                              lazy_releases, lazy_takeovers
 */
#ifndef Py_BUILD_CORE_BUILTIN
#  define Py_BUILD_CORE_MODULE 1
#endif

#include "Python.h"
#include <gil.h>

#ifndef Py_RUST_GIL
#  error "_rustgil needs an interpreter configured --with-rust-gil"
#endif

/* Defined in Python/ceval_gil_rust.h. */
PyAPI_FUNC(void *) _PyRustGil_Current(void);

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
    gil_policy_t policy;
    uint64_t lazy_us;
    gil_result_t r = gil_get_policy(lock, &policy);
    if (r == GIL_OK) {
        r = gil_get_lazy_release(lock, &lazy_us);
    }
    if (r != GIL_OK) {
        return lock_error("gil_get_policy", r);
    }
    /* The preset's name: the policy, "-lazy" with lazy release (plain
       "lazy" for classic + lazy release). */
    const char *name = gil_policy_name(policy);
    if (name == NULL) {
        name = "unknown";
    }
    if (lazy_us == 0) {
        return PyUnicode_FromString(name);
    }
    if (policy == GIL_POLICY_CLASSIC) {
        return PyUnicode_FromString("lazy");
    }
    return PyUnicode_FromFormat("%s-lazy", name);
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

static PyObject *
rustgil_counters(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    gil_t *lock = current_lock();
    if (lock == NULL) {
        return NULL;
    }
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
        set_u64(d, "lazy_takeovers", c.lazy_takeovers) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyMethodDef rustgil_methods[] = {
    {"policy", rustgil_policy, METH_NOARGS, "policy()\n--\n\nThe GIL policy of the current interpreter."},
    {"switch_interval", rustgil_switch_interval, METH_NOARGS,
     "switch_interval()\n--\n\nThe switch interval in seconds, as the library holds it."},
    {"lazy_release", rustgil_lazy_release, METH_NOARGS,
     "lazy_release()\n--\n\nThe lazy-release threshold in seconds (0.0: lazy release is off)."},
    {"counters", rustgil_counters, METH_NOARGS,
     "counters()\n--\n\nThe current interpreter's GIL counters: acquisitions, switches,\n"
     "drop_requests, forced_switches, wait_ns."},
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
