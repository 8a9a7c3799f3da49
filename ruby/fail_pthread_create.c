/*
 * fail_pthread_create.c: built and LD_PRELOAD'd by ruby/test.sh. While the
 * environment variable RUSTGIL_TEST_FAIL_PTHREAD_CREATE is set,
 * pthread_create fails with EAGAIN, as it does at a thread or memory
 * limit; otherwise it is the C library's. The Ruby program sets and
 * unsets the variable (ENV writes the process's environment) around the
 * Thread.new that is to fail, holding the GVL, so no other thread of the
 * VM creates a thread meanwhile; unlike RLIMIT_NPROC this binds root too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

typedef int create_fn(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* Looked up before main, while the process has one thread. */
static create_fn *real_pthread_create;

__attribute__((constructor)) static void
find_real_pthread_create(void)
{
    /* POSIX's way to turn dlsym's void * into a function pointer. */
    *(void **)&real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
}

int
pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
    if (getenv("RUSTGIL_TEST_FAIL_PTHREAD_CREATE") != NULL) return EAGAIN;
    if (real_pthread_create == NULL) return ENOSYS;
    return real_pthread_create(thread, attr, start, arg);
}
