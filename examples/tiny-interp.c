/*
 * tiny-interp: how to embed the gil library in an interpreter.
 *
 * A very small bytecode VM runs in several threads under one GIL, the way
 * CPython does:
 *   - each interpreter thread has an "eval breaker" flag; the lock's
 *     drop-request callback sets it on the holder, and the VM loop checks it
 *     every CHECK_EVERY instructions, answering with a forced release;
 *   - around every blocking call (recv, send) a thread releases the lock
 *     voluntarily and takes it back afterwards.
 *
 * It runs one I/O thread, which serves a TCP echo on 127.0.0.1 (running a
 * little bytecode per message, as a real server would), beside 0..N
 * CPU-bound interpreter threads, and prints I/O round trips/s and CPU work/s
 * for each N. A client thread outside the interpreter (it never takes the
 * GIL) sends 100-byte requests back to back.
 *
 *   tiny-interp [--policy NAME] [--max-cpu N] [--seconds S] [--interval-us US]
 *
 * NAME is one of the library's presets (gil_preset_name): classic (CPython's
 * GIL), priority, lazy, priority-lazy.
 *
 * It builds on POSIX systems and, with mingw-w64, on Windows (threads from
 * winpthreads, sockets from Winsock: the few lines below that differ).
 */
#define _GNU_SOURCE
#include <gil.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- sockets: POSIX or Winsock ------------------------------------------ */
#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
typedef SOCKET sock_t;
#define MSG_NOSIGNAL 0 /* Windows raises no SIGPIPE */
#define SHUT_RDWR SD_BOTH
static int sock_ok(sock_t s) { return s != INVALID_SOCKET; }
static void sock_close(sock_t s) { closesocket(s); }
static void net_init(void) {
    WSADATA data;
    if (WSAStartup(MAKEWORD(2, 2), &data) != 0) {
        fprintf(stderr, "tiny-interp: WSAStartup failed\n");
        exit(1);
    }
}
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
typedef int sock_t;
static int sock_ok(sock_t s) { return s >= 0; }
static void sock_close(sock_t s) { close(s); }
static void net_init(void) {}
#endif

/* ---- the VM --------------------------------------------------------------- */

enum op { OP_SET, OP_XORSHIFT, OP_ADD, OP_DECJNZ, OP_COUNT, OP_HALT };

struct insn {
    enum op op;
    int a, b;   /* registers or an immediate */
    int64_t imm;
};

/* One interpreter thread: the GIL token is a pointer to this struct. */
struct vm_thread {
    gil_t *gil;
    atomic_int eval_breaker; /* set by the drop-request callback */
    int64_t regs[4];
    uint64_t work;           /* OP_COUNT executions */
    uint64_t forced_drops;
};

enum { CHECK_EVERY = 64 };

static atomic_int stop_cpu;

static void die(const char *what, gil_result_t r) {
    fprintf(stderr, "tiny-interp: %s: %s\n", what, gil_result_str(r));
    exit(1);
}

/* The holder answers a drop request: forced release, then take it back. */
static void handle_eval_breaker(struct vm_thread *t) {
    atomic_store(&t->eval_breaker, 0);
    gil_result_t r = gil_release(t->gil, t, GIL_RELEASE_FORCED);
    if (r != GIL_OK) die("release", r);
    t->forced_drops++;
    if ((r = gil_acquire(t->gil, t)) != GIL_OK) die("acquire", r);
}

/* Runs `code` until OP_HALT (or, for endless programs, until stop_cpu). */
static void run(struct vm_thread *t, const struct insn *code) {
    int64_t *r = t->regs;
    int pc = 0, budget = CHECK_EVERY;
    for (;;) {
        if (--budget == 0) {
            budget = CHECK_EVERY;
            if (atomic_load_explicit(&t->eval_breaker, memory_order_relaxed)) handle_eval_breaker(t);
            if (atomic_load_explicit(&stop_cpu, memory_order_relaxed)) return;
        }
        const struct insn *i = &code[pc++];
        switch (i->op) {
        case OP_SET: r[i->a] = i->imm; break;
        case OP_XORSHIFT:
            r[i->a] ^= r[i->a] << 13;
            r[i->a] ^= (int64_t)((uint64_t)r[i->a] >> 7);
            r[i->a] ^= r[i->a] << 17;
            break;
        case OP_ADD: r[i->a] += r[i->b]; break;
        case OP_DECJNZ:
            if (--r[i->a] != 0) pc = (int)i->imm;
            break;
        case OP_COUNT: t->work++; break;
        case OP_HALT: return;
        }
    }
}

/* CPU-bound: an endless loop of arithmetic; one "work unit" per 1000 rounds. */
static const struct insn cpu_program[] = {
    {OP_SET, 1, 0, INT64_C(88172645463325252)},
    {OP_SET, 0, 0, 1000},          /* 1: */
    {OP_XORSHIFT, 1, 0, 0},        /* 2: */
    {OP_ADD, 2, 1, 0},
    {OP_DECJNZ, 0, 0, 2},
    {OP_COUNT, 0, 0, 0},
    {OP_DECJNZ, 3, 0, 1},          /* r3 never reaches 0 from 0: endless */
    {OP_HALT, 0, 0, 0},
};

/* What the server does per message: a little bytecode (about 200 insns). */
static const struct insn handle_program[] = {
    {OP_SET, 0, 0, 50},
    {OP_XORSHIFT, 1, 0, 0},        /* 1: */
    {OP_ADD, 2, 1, 0},
    {OP_DECJNZ, 0, 0, 1},
    {OP_COUNT, 0, 0, 0},
    {OP_HALT, 0, 0, 0},
};

static void on_drop_request(void *user_data, void *holder) {
    (void)user_data;
    /* Called under the lock's mutex while `holder` still holds the lock, so
       the thread struct is alive. */
    atomic_store(&((struct vm_thread *)holder)->eval_breaker, 1);
}

static void *cpu_thread(void *arg) {
    struct vm_thread *t = arg;
    gil_result_t r = gil_acquire(t->gil, t);
    if (r != GIL_OK) die("acquire", r);
    t->regs[3] = 0;
    run(t, cpu_program);
    if ((r = gil_release(t->gil, t, GIL_RELEASE_FINAL)) != GIL_OK) die("release", r);
    return NULL;
}

/* ---- the I/O side ------------------------------------------------------- */

enum { MSG_LEN = 100 };

struct io_args {
    struct vm_thread vm;
    sock_t listen_fd;
    atomic_int stop_io;
};

static int read_full(sock_t fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = recv(fd, buf + got, n - got, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

/* Blocking calls release the GIL around them, as Py_BEGIN_ALLOW_THREADS. */
static int gil_read_full(struct vm_thread *t, sock_t fd, char *buf, size_t n) {
    gil_result_t r = gil_release(t->gil, t, GIL_RELEASE_VOLUNTARY);
    if (r != GIL_OK) die("release", r);
    int rc = read_full(fd, buf, n);
    if ((r = gil_acquire(t->gil, t)) != GIL_OK) die("acquire", r);
    return rc;
}

static int gil_send_full(struct vm_thread *t, sock_t fd, const char *buf, size_t n) {
    gil_result_t r = gil_release(t->gil, t, GIL_RELEASE_VOLUNTARY);
    if (r != GIL_OK) die("release", r);
    ssize_t k = send(fd, buf, n, MSG_NOSIGNAL);
    if ((r = gil_acquire(t->gil, t)) != GIL_OK) die("acquire", r);
    return k == (ssize_t)n ? 0 : -1;
}

static void *io_server(void *arg) {
    struct io_args *a = arg;
    struct vm_thread *t = &a->vm;
    gil_result_t r = gil_acquire(t->gil, t);
    if (r != GIL_OK) die("acquire", r);
    sock_t conn = accept(a->listen_fd, NULL, NULL); /* a blocking call too, but once */
    int one = 1;
    setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, (const void *)&one, sizeof one);
    char buf[MSG_LEN];
    while (gil_read_full(t, conn, buf, MSG_LEN) == 0) {
        run(t, handle_program);
        if (gil_send_full(t, conn, buf, MSG_LEN) != 0) break;
    }
    sock_close(conn);
    if ((r = gil_release(t->gil, t, GIL_RELEASE_FINAL)) != GIL_OK) die("release", r);
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- one measurement ---------------------------------------------------- */

struct result {
    double round_trips_per_s, work_per_s;
    gil_counters_t counters;
};

static struct result measure(const char *preset, uint64_t interval_us, int n_cpu, double seconds) {
    gil_config_t config;
    gil_t *gil = NULL;
    gil_result_t r;
    if ((r = gil_config_preset(preset, &config)) != GIL_OK) die("preset", r);
    config.switch_interval_us = interval_us;
    config.on_drop_request = on_drop_request;
    if ((r = gil_new(&config, &gil)) != GIL_OK) die("gil_new", r);

    sock_t lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    if (!sock_ok(lfd) || bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0) {
        perror("tiny-interp: listen on 127.0.0.1");
        exit(1);
    }

    struct io_args io;
    memset(&io, 0, sizeof io);
    io.vm.gil = gil;
    io.listen_fd = lfd;
    pthread_t io_th;
    pthread_create(&io_th, NULL, io_server, &io);

    atomic_store(&stop_cpu, 0);
    struct vm_thread *cpu = calloc((size_t)n_cpu + 1, sizeof *cpu);
    pthread_t *cpu_th = calloc((size_t)n_cpu + 1, sizeof *cpu_th);
    for (int i = 0; i < n_cpu; i++) {
        cpu[i].gil = gil;
        pthread_create(&cpu_th[i], NULL, cpu_thread, &cpu[i]);
    }

    /* The client: outside the interpreter, never touches the GIL. */
    sock_t cfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, (const void *)&one, sizeof one);
    if (connect(cfd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("tiny-interp: connect");
        exit(1);
    }
    char msg[MSG_LEN], back[MSG_LEN];
    memset(msg, 'x', sizeof msg);
    uint64_t trips = 0;
    double t0 = now_s(), t_end = t0 + seconds;
    uint64_t work0 = 0;
    for (int i = 0; i < n_cpu; i++) work0 += cpu[i].work; /* racy read: a rate, not an invariant */
    while (now_s() < t_end) {
        if (send(cfd, msg, MSG_LEN, MSG_NOSIGNAL) != MSG_LEN || read_full(cfd, back, MSG_LEN) != 0) break;
        if (memcmp(msg, back, MSG_LEN) != 0) {
            fprintf(stderr, "tiny-interp: echo corrupted\n");
            exit(1);
        }
        trips++;
    }
    double elapsed = now_s() - t0;
    atomic_store(&stop_cpu, 1);
    shutdown(cfd, SHUT_RDWR);
    sock_close(cfd);
    pthread_join(io_th, NULL);
    uint64_t work = 0;
    for (int i = 0; i < n_cpu; i++) {
        pthread_join(cpu_th[i], NULL);
        work += cpu[i].work;
    }
    sock_close(lfd);

    struct result res;
    res.round_trips_per_s = (double)trips / elapsed;
    res.work_per_s = (double)(work - work0) / elapsed;
    memset(&res.counters, 0, sizeof res.counters);
    res.counters.struct_size = sizeof res.counters;
    if ((r = gil_get_counters(gil, &res.counters)) != GIL_OK) die("counters", r);
    if ((r = gil_free(gil)) != GIL_OK) die("gil_free", r);
    free(cpu);
    free(cpu_th);
    return res;
}

static void usage(void) {
    fprintf(stderr, "usage: tiny-interp [--policy NAME] [--max-cpu N] [--seconds S] [--interval-us US]\n");
    exit(2);
}

int main(int argc, char **argv) {
    net_init();
    const char *policy_name = "classic";
    int max_cpu = 2;
    double seconds = 1.0;
    uint64_t interval_us = GIL_DEFAULT_SWITCH_INTERVAL_US;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        char *end = NULL;
        if (strcmp(argv[i], "--policy") == 0) {
            policy_name = argv[++i];
        } else if (strcmp(argv[i], "--max-cpu") == 0) {
            max_cpu = (int)strtol(argv[++i], &end, 10);
            if (*end || max_cpu < 0 || max_cpu > 64) usage();
        } else if (strcmp(argv[i], "--seconds") == 0) {
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0 && seconds <= 3600)) usage();
        } else if (strcmp(argv[i], "--interval-us") == 0) {
            interval_us = strtoull(argv[++i], &end, 10);
            if (*end) usage();
        } else {
            usage();
        }
    }
    gil_config_t probe;
    gil_result_t r = gil_config_preset(policy_name, &probe);
    if (r != GIL_OK) {
        fprintf(stderr, "tiny-interp: policy \"%s\": %s; known:", policy_name, gil_result_str(r));
        for (size_t i = 0; gil_preset_name(i) != NULL; i++) fprintf(stderr, " %s", gil_preset_name(i));
        fprintf(stderr, "\n");
        return 2;
    }
    if (interval_us > GIL_MAX_SWITCH_INTERVAL_US) {
        fprintf(stderr, "tiny-interp: --interval-us above %llu\n", (unsigned long long)GIL_MAX_SWITCH_INTERVAL_US);
        return 2;
    }

    printf("gil %s, policy %s, switch interval %llu us, %.1f s per row, 100-byte echo over TCP loopback\n",
           gil_version(), policy_name, (unsigned long long)interval_us, seconds);
    printf("%-11s %14s %14s %10s %13s %15s\n", "cpu threads", "round trips/s", "cpu work/s", "switches",
           "drop requests", "forced switches");
    for (int n = 0; n <= max_cpu; n++) {
        struct result res = measure(policy_name, interval_us, n, seconds);
        printf("%-11d %14.0f %14.0f %10llu %13llu %15llu\n", n, res.round_trips_per_s, res.work_per_s,
               (unsigned long long)res.counters.switches, (unsigned long long)res.counters.drop_requests,
               (unsigned long long)res.counters.forced_switches);
        fflush(stdout);
    }
    return 0;
}
