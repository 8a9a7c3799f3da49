/*
 * Unloading the shared library while its monitor thread runs: a program
 * that loads the library at run time (LoadLibrary, dlopen), makes a lock
 * with a monitor preset, lets a waiter start the process-wide monitor
 * thread, frees the lock and unloads the library at once, then keeps
 * running past the monitor's idle exit (100 ms after its last lock). The
 * thread must not return into unmapped code (issue 57: it did on Windows,
 * and the process crashed).
 *
 *   unload LIBRARY     (gil.dll; a path to libgil.so on Linux)
 *
 * On Windows it also checks that the library does go away once the
 * monitor has exited (the thread's reference to it is not leaked), and
 * that it loads again and works. docs/platforms.md says what an embedder
 * that unloads the library may rely on, per OS. Run by scripts/c-tests.sh
 * (Linux) and scripts/platforms.sh (Wine).
 */
#include <gil.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- platform layer: the loader, threads, a short sleep --------------- */
#ifdef _WIN32
#include <windows.h>
typedef HMODULE library_t;
typedef HANDLE thread_t;
#define THREAD_FN(name) static DWORD WINAPI name(void *arg)
#define THREAD_RETURN return 0
static library_t library_open(const char *name) { return LoadLibraryA(name); }
static int library_close(library_t lib) { return FreeLibrary(lib) ? 0 : -1; }
typedef void (*any_fn)(void);
static any_fn library_symbol(library_t lib, const char *name) {
    return (any_fn)(void (*)(void))GetProcAddress(lib, name);
}
static int thread_start(thread_t *t, LPTHREAD_START_ROUTINE fn, void *arg) {
    *t = CreateThread(NULL, 0, fn, arg, 0, NULL);
    return *t != NULL ? 0 : -1;
}
static void thread_join(thread_t t) {
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
}
static void sleep_ms(unsigned ms) { Sleep(ms); }
/* A crash in any thread ends the process with status 70 and says where:
   under Wine an unhandled exception starts its debugger, and the process
   may end with status 0. */
static LONG WINAPI crashed(EXCEPTION_POINTERS *e) {
    fprintf(stderr, "unload: a thread crashed: exception 0x%lx at %p\n",
            (unsigned long)e->ExceptionRecord->ExceptionCode, e->ExceptionRecord->ExceptionAddress);
    fflush(stderr);
    TerminateProcess(GetCurrentProcess(), 70);
    return EXCEPTION_EXECUTE_HANDLER;
}
static void catch_crashes(void) { SetUnhandledExceptionFilter(crashed); }
#else
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
typedef void *library_t;
typedef pthread_t thread_t;
#define THREAD_FN(name) static void *name(void *arg)
#define THREAD_RETURN return NULL
static library_t library_open(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
static int library_close(library_t lib) { return dlclose(lib); }
typedef void (*any_fn)(void);
static any_fn library_symbol(library_t lib, const char *name) {
    /* POSIX's dlsym returns an object pointer; ISO C has no cast from it to
       a function pointer, so the bits are copied (as POSIX advises). */
    void *sym = dlsym(lib, name);
    any_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    return fn;
}
static int thread_start(thread_t *t, void *(*fn)(void *), void *arg) { return pthread_create(t, NULL, fn, arg); }
static void thread_join(thread_t t) { pthread_join(t, NULL); }
static void sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
static void catch_crashes(void) {} /* a crash is SIGSEGV: a failed status */
#endif

/* The calls this program makes, found by name in the loaded library. */
struct api {
    gil_result_t (*config_preset)(const char *, gil_config_t *);
    gil_result_t (*new_lock)(const gil_config_t *, gil_t **);
    gil_result_t (*free_lock)(gil_t *);
    gil_result_t (*acquire)(gil_t *, void *);
    gil_result_t (*release)(gil_t *, void *, gil_release_reason_t);
    bool (*drop_requested)(const gil_t *);
};

static void die(const char *what) {
    fprintf(stderr, "unload: %s\n", what);
    exit(1);
}

static any_fn need(library_t lib, const char *name) {
    any_fn fn = library_symbol(lib, name);
    if (fn == NULL) die(name);
    return fn;
}

static struct api load_api(library_t lib) {
    struct api a;
    a.config_preset = (gil_result_t(*)(const char *, gil_config_t *))need(lib, "gil_config_preset");
    a.new_lock = (gil_result_t(*)(const gil_config_t *, gil_t **))need(lib, "gil_new");
    a.free_lock = (gil_result_t(*)(gil_t *))need(lib, "gil_free");
    a.acquire = (gil_result_t(*)(gil_t *, void *))need(lib, "gil_acquire");
    a.release = (gil_result_t(*)(gil_t *, void *, gil_release_reason_t))need(lib, "gil_release");
    a.drop_requested = (bool (*)(const gil_t *))need(lib, "gil_drop_requested");
    return a;
}

struct waiter {
    const struct api *api;
    gil_t *gil;
    int failed;
};

THREAD_FN(waiter_main) {
    struct waiter *w = arg;
    int token;
    if (w->api->acquire(w->gil, &token) != GIL_OK) w->failed = 1;
    if (w->api->release(w->gil, &token, GIL_RELEASE_FINAL) != GIL_OK) w->failed = 1;
    THREAD_RETURN;
}

/* One lock with `preset`: the main thread holds it until a waiter's drop
   request shows that the monitor thread is timing the wait, then both
   make their final release, and the lock is freed. */
static void use_a_monitored_lock(const struct api *a, const char *preset) {
    gil_config_t config;
    gil_t *gil = NULL;
    int token;
    if (a->config_preset(preset, &config) != GIL_OK) die("gil_config_preset");
    if (a->new_lock(&config, &gil) != GIL_OK) die("gil_new");
    if (a->acquire(gil, &token) != GIL_OK) die("gil_acquire");
    struct waiter w = {a, gil, 0};
    thread_t t;
    if (thread_start(&t, waiter_main, &w) != 0) die("thread start");
    /* The monitor raises it after a switch interval of waiting (a hang
       guard only: no time is asserted). */
    for (int i = 0; !a->drop_requested(gil); i++) {
        if (i == 60000) die("no drop request from the monitor after a minute");
        sleep_ms(1);
    }
    if (a->release(gil, &token, GIL_RELEASE_FINAL) != GIL_OK) die("gil_release");
    thread_join(t);
    if (w.failed) die("the waiter's acquire or release failed");
    if (a->free_lock(gil) != GIL_OK) die("gil_free");
}

int main(int argc, char **argv) {
    if (argc != 2) die("usage: unload LIBRARY");
    catch_crashes();
    const char *preset = "priority-monitor";
    library_t lib = library_open(argv[1]);
    if (lib == NULL) die("cannot load the library");
#ifdef _WIN32
    /* The check of its unloading below asks by this name. */
    if (GetModuleHandleA(argv[1]) != lib) die("the loaded library is not found by its name");
#endif
    struct api a = load_api(lib);
    use_a_monitored_lock(&a, preset);
    /* The lock is freed; the monitor thread still runs (until its idle
       exit) when the library is unloaded. */
    if (library_close(lib) != 0) die("cannot unload the library");
    /* Past the monitor's idle exit several times over: where it returned
       into the unmapped library, the process has crashed by now. */
    sleep_ms(1000);
#ifdef _WIN32
    /* Its reference goes with the thread: the library is unloaded (a hang
       guard only, as above). */
    for (int i = 0; GetModuleHandleA(argv[1]) != NULL; i++) {
        if (i == 60000) die("gil.dll still loaded a minute after the monitor's idle exit");
        sleep_ms(1);
    }
    /* And it loads again, fresh, and works. */
    lib = library_open(argv[1]);
    if (lib == NULL) die("cannot load the library again");
    a = load_api(lib);
    use_a_monitored_lock(&a, preset);
    if (library_close(lib) != 0) die("cannot unload the library again");
    sleep_ms(1000);
#endif
    printf("unload: the library was unloaded under its monitor thread, and the process lives on\n");
    return 0;
}
