/*
 * oi_hal.c — the HAL's operating-system half on Linux / POSIX: aligned memory, the .oinf file
 * opened or mapped, the monotonic timer, the thread pool. oi_hal_core.c has the rest (status
 * strings, the .oinf reader over memory, the CPU check); oi_hal_baremetal.c replaces this file
 * on a microcontroller. See oi_hal.h for the contract of each function.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE         /* madvise() and MADV_HUGEPAGE (Linux), where the libc has them */
#include "oi_hal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ memory */

/* Large buffers (a model's weights, an arena holding packed constants) go in 2 MiB pages where the
 * kernel offers them: a kernel that streams a matrix from memory (a GEMV over a decoder's weights)
 * crosses a 4 KiB page every 64 cache lines, and on 4 KiB pages the hardware prefetchers stop at
 * every boundary and each page costs a TLB walk. Measured on a Zen 3 host (AVX2): a [1, 1024] @
 * [1024, 4096] vecmat from DRAM took 0.79-0.81 ms over 4 KiB pages and 0.68-0.71 ms over 2 MiB
 * ones (NumPy's matrices, which it advises the same way). Linux hands out such pages only for
 * memory advised with MADV_HUGEPAGE when transparent_hugepage is "madvise" (the usual setting). */
#define OI_HUGE_PAGE ((size_t)2 << 20)
#define OI_HUGE_MIN ((size_t)4 << 20)   /* below this a buffer spans too few huge pages to matter */

static void advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    uintptr_t lo = ((uintptr_t)p + OI_HUGE_PAGE - 1) & ~(uintptr_t)(OI_HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(OI_HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);   /* advice only: failure is harmless */
#else
    (void)p;
    (void)bytes;
#endif
}

void *oi_aligned_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) return NULL;
    if (posix_memalign(&p, bytes >= OI_HUGE_MIN ? OI_HUGE_PAGE : OI_ALIGN, bytes) != 0) return NULL;
    if (bytes >= OI_HUGE_MIN) advise_huge(p, bytes);    /* before the memset below touches the pages */
    memset(p, 0, bytes);
    return p;
}

void oi_aligned_free(void *ptr) { free(ptr); }

/* ------------------------------------------------------------------------------------------ .oinf files */


#ifdef MADV_HUGEPAGE
/* The whole file read into private memory on 2 MiB pages (see advise_huge), then made read-only,
 * for a file large enough to gain from them; a mapping of the file itself would stay on 4 KiB
 * pages (Linux backs file mappings with huge pages only for executable text). The region is
 * exactly round_up(bytes, 2 MiB) long and 2 MiB-aligned (oi_oinf_close unmaps it so). The read
 * costs what faulting in the mapping costs (both copy from the page cache); MAP_FAILED on any
 * failure, and the caller maps the file instead. */
static void *read_into_huge_pages(int fd, size_t bytes) {
    const size_t len = (bytes + OI_HUGE_PAGE - 1) & ~(OI_HUGE_PAGE - 1);
    uint8_t *raw = mmap(NULL, len + OI_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return MAP_FAILED;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + OI_HUGE_PAGE - 1) & ~(uintptr_t)(OI_HUGE_PAGE - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));                        /* trim to the aligned region */
    if (raw + len + OI_HUGE_PAGE > p + len) munmap(p + len, (size_t)(raw + len + OI_HUGE_PAGE - (p + len)));
    advise_huge(p, len);
    for (size_t done = 0; done < bytes;) {
        ssize_t n = pread(fd, p + done, bytes - done, (off_t)done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            munmap(p, len);
            return MAP_FAILED;
        }
        done += (size_t)n;
    }
    if (mprotect(p, len, PROT_READ) != 0) {   /* weights stay read-only, as in a mapping of the file */
        munmap(p, len);
        return MAP_FAILED;
    }
    return p;
}
#endif

/* oi_oinf_open and oi_oinf_map: `read_in` chooses reading a large file onto huge pages over
 * mapping it. */
static oi_status open_file(const char *path, oi_oinf *out, int read_in) {
    if (!path || !out) return OI_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OI_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return OI_ERR_IO;
    }
    if (st.st_size < 72) {
        close(fd);
        return OI_ERR_MODEL_FORMAT;
    }
    void *p = MAP_FAILED;
    int mapped = 1;
#ifdef MADV_HUGEPAGE
    if (read_in && (uint64_t)st.st_size >= OI_HUGE_MIN && (uint64_t)st.st_size <= SIZE_MAX - 2 * OI_HUGE_PAGE) {
        p = read_into_huge_pages(fd, (size_t)st.st_size);
        if (p != MAP_FAILED) mapped = 2;
    }
#endif
    if (p == MAP_FAILED) p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return OI_ERR_IO;
    oi_status s = oi_oinf_open_memory(p, (uint64_t)st.st_size, out);   /* parses it (oi_hal_core.c) */
    out->base = p;          /* (cleared on failure: oi_oinf_close below unmaps it) */
    out->size = (uint64_t)st.st_size;
    out->mapped = mapped;
    if (s != OI_OK) oi_oinf_close(out);
    return s;
}

oi_status oi_oinf_open(const char *path, oi_oinf *out) {
    return open_file(path, out, 1);
}

oi_status oi_oinf_map(const char *path, oi_oinf *out) {
    return open_file(path, out, 0);
}

void oi_oinf_close(oi_oinf *f) {
    if (!f) return;
    if (f->mapped == 1 && f->base) munmap((void *)f->base, (size_t)f->size);
#ifdef MADV_HUGEPAGE
    if (f->mapped == 2 && f->base) munmap((void *)f->base, ((size_t)f->size + OI_HUGE_PAGE - 1) & ~(OI_HUGE_PAGE - 1));
#endif
    memset(f, 0, sizeof *f);
}
/* ------------------------------------------------------------------------------------------ environment */

const char *oi_env(const char *name) { return getenv(name); }

/* ------------------------------------------------------------------------------------------ time */

uint64_t oi_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------------------------ threads */

/*
 * The pool has two ways of handing work to its workers.
 *
 *  1. The task queue (oi_pool_submit / oi_pool_wait), for yield/await consumers: a FIFO list
 *     under `mu`; `pending` counts queued + running tasks and `idle` is signalled when it drops to
 *     zero. Tasks are coarse (a whole block), so a mutex costs nothing here. Task nodes come from
 *     slots allocated at create (OI_POOL_TASK_SLOTS per thread), so submitting never touches the
 *     heap and a step runs without it at any thread count; with every slot in use, a submitted
 *     task runs in the caller (what a pool without workers does) and a busy-slot parallel_for
 *     queues fewer helpers.
 *
 *  2. The parallel_for slot, for kernels. A batch-1 GEMV takes a few hundred microseconds, and
 *     waking a sleeping thread (futex wake, scheduler, cache warm-up) costs tens of microseconds
 *     each way, so a pool whose workers sleep between kernels loses most of its gain to wake-up
 *     latency. Hence: an idle worker *spins* for a while, watching `gen`, so that the next kernel
 *     starts on every thread within a few hundred nanoseconds; no mutex is taken on that path.
 *     The spin is bounded (OI_POOL_SPIN_NS, ~100 us, timed with the monotonic clock and using
 *     the CPU's pause/yield hint so the sibling hyper-thread keeps running): a library that
 *     goes idle then sleeps on the condition variable `work`, so it does not burn cores. A
 *     spinning worker also calls sched_yield() every ~25 us, so on a busy machine a thread
 *     waiting for its CPU gets it, and a pool with more threads than online CPUs does not spin
 *     at all (its workers would only take CPU time from the threads doing the work). While
 *     oi_pool_hold_awake holds the pool (a trace hook is installed), the budget does not end the
 *     spin: the hook's callbacks between nodes would otherwise put the workers to sleep and the
 *     profile would time wake-ups the untraced step never pays.
 *
 * The slot protocol (one job at a time; the job's fields live in the pool):
 *
 *   owner (the parallel_for caller)           worker
 *   -------------------------------           ------
 *   exchange(busy, 1)  [acquire]              g = load(gen)  [acquire]; g odd and not yet seen:
 *   write job fields, next = 0                  fetch_add(inside, 1)      [seq_cst]
 *   store(gen, g odd: open)     [seq_cst]       if load(gen) == g         [seq_cst]
 *   if load(sleepers) > 0: broadcast(work)        claim chunks, run them
 *   claim chunks, run them                      fetch_sub(inside, 1)      [seq_cst]
 *   store(gen, g + 1: closed)   [seq_cst]         if it was the last one and
 *   spin until load(inside) == 0 [seq_cst]          load(owner_waiting):    [seq_cst]
 *     (past the budget: store(owner_waiting, 1),      broadcast(left) under mu
 *      then wait on `left` under mu)
 *   store(busy, 0)              [release]
 *
 *   - Chunks are claimed with fetch_add on `next` (relaxed: it only has to hand every chunk
 *     index out once; the data the chunks use is published by the `gen` store). The caller runs
 *     chunks too, so a worker that arrives late just finds fewer (or no) chunks left.
 *   - The job's fields must not be read once the owner has left (the next owner rewrites them).
 *     A worker registers in `inside` *before* re-checking `gen`; the owner closes `gen` *before*
 *     reading `inside`. With all four accesses seq_cst, either the owner sees the worker's
 *     increment (and waits for it) or the worker sees the job closed (and touches nothing):
 *     the classic store-then-load (Dekker) pairing, which needs seq_cst, not acquire/release.
 *   - Completion: when `inside` is 0 after the close, every chunk has been claimed (the owner's
 *     loop ended) and every claimed chunk has finished; the decrements (release, and a release
 *     sequence on `inside`) make the workers' outputs visible to the owner's load of 0.
 *   - Sleeping: a worker that exhausted its spin budget increments `sleepers` under `mu` and then
 *     re-reads `gen` before pthread_cond_wait; the owner stores `gen` and then reads `sleepers`
 *     (the same seq_cst pairing), so either the worker sees the new job or the owner sees the
 *     sleeper and broadcasts under `mu` (which cannot be missed, as the sleeper holds `mu` until
 *     it waits). Hence no wake-up is lost and the hot path takes no lock when nobody sleeps.
 *     The owner waiting for the last chunks does the same: it spins for the budget, then sets
 *     `owner_waiting` and sleeps on `left` while `inside` != 0; the worker whose decrement
 *     reaches 0 reads `owner_waiting` after it (the same pairing) and broadcasts under `mu`.
 *   - `gen` only grows (odd: open, even: closed), so a stale value never matches a later job.
 *
 * parallel_for inside a pool task (a yield/await consumer running on a worker), or nested inside
 * a chunk, finds the slot busy when another parallel_for holds it; it then queues helper tasks
 * (path 1) as before. Its caller never waits for a helper that has not started: after running
 * the chunks itself it removes its helpers still in the queue, and waits only for those a worker
 * already took (which finish without needing anything from the caller). So no parallel_for ever
 * waits for a worker that is busy elsewhere, and nothing can deadlock.
 */

/* Task nodes per pool thread (allocated at create): a yield queues one task per consumer, a
 * parallel_for whose slot is busy at most one helper per worker. */
#define OI_POOL_TASK_SLOTS 16

#ifndef OI_POOL_SPIN_NS
#define OI_POOL_SPIN_NS 100000u   /* how long an idle worker (or a waiting owner) spins */
#endif
#define OI_CACHE_LINE 64
#define OI_SPIN_YIELD_EVERY 1024u /* pauses (~25 us) between sched_yield()s of a spinning worker */
#define OI_CHUNKS_PER_THREAD 8    /* dynamic chunks per thread: balance without much claiming */

static inline void cpu_relax(void) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_ia32_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

typedef struct task {
    oi_task_fn fn;
    void *arg;
    struct task *next;
} task;

/* One parallel_for: [0, n) in `nchunks` chunks of `chunk` indices (the last may be shorter). */
typedef struct range {
    oi_range_fn fn;
    void *ctx;
    int64_t n, chunk, nchunks;
    _Alignas(OI_CACHE_LINE) atomic_int_fast64_t next;   /* next unclaimed chunk index */
} range;

struct oi_pool {
    /* the task queue and the lifecycle: under mu */
    pthread_mutex_t mu;
    pthread_cond_t work;      /* signalled when a task is queued, a job is opened with sleepers,
                                 or on shutdown */
    pthread_cond_t idle;      /* signalled when the last pending task finishes */
    pthread_cond_t left;      /* signalled when the last worker leaves a job whose owner sleeps */
    task *head, *tail;
    task *slots;              /* the task nodes, allocated at create */
    task *free_tasks;         /* the unused ones, a list through `next` */
    int64_t pending;          /* queued + running tasks */
    int n_threads;
    uint64_t spin_ns;         /* OI_POOL_SPIN_NS, or 0 when there are more threads than CPUs */
    pthread_t *threads;
    atomic_int stop;          /* written under mu; also read by spinning workers */
    atomic_int queued;        /* tasks in the queue: lets spinning workers see one without mu */
    atomic_int sleepers;      /* workers about to wait or waiting on `work` */
    atomic_int numbered;      /* workers that took their number (oi_pool_slot) */
    atomic_int held;          /* oi_pool_hold_awake: idle workers spin past the budget */
    /* the parallel_for slot (see the comment above); hot words on lines of their own */
    _Alignas(OI_CACHE_LINE) atomic_uint_fast64_t gen;   /* odd: job open; even: closed */
    _Alignas(OI_CACHE_LINE) atomic_int inside;          /* workers registered in the job */
    atomic_int owner_waiting;                           /* the owner sleeps on `left` */
    _Alignas(OI_CACHE_LINE) atomic_int busy;            /* 1 while a parallel_for owns the slot */
    range job;
};

/* An unused task node, or NULL when every one is queued or running; caller holds mu. */
static task *take_slot_locked(oi_pool *pool) {
    task *t = pool->free_tasks;
    if (t) pool->free_tasks = t->next;
    return t;
}

static void release_slot_locked(oi_pool *pool, task *t) {
    t->next = pool->free_tasks;
    pool->free_tasks = t;
}

int oi_default_threads(int fallback) {
    const char *env = getenv("OI_NUM_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v > 0 && v <= 1024) return (int)v;
    }
    return fallback > 0 ? fallback : 1;
}

/* Claims chunks of `r` until none is left and runs them. */
static void run_range(range *r) {
    const oi_range_fn fn = r->fn;
    void *const ctx = r->ctx;
    const int64_t n = r->n, chunk = r->chunk, nchunks = r->nchunks;
    for (;;) {
        /* each thread overshoots nchunks by at most one claim: no overflow */
        int64_t i = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
        if (i >= nchunks) return;
        int64_t b = i * chunk;
        fn(ctx, b, n - b > chunk ? b + chunk : n);
    }
}

/* A worker joins job `g` of the slot (seen open in `gen`); see the protocol above. */
static void join_job(oi_pool *pool, uint_fast64_t g) {
    atomic_fetch_add_explicit(&pool->inside, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&pool->gen, memory_order_seq_cst) == g) run_range(&pool->job);
    if (atomic_fetch_sub_explicit(&pool->inside, 1, memory_order_seq_cst) == 1 &&
        atomic_load_explicit(&pool->owner_waiting, memory_order_seq_cst)) {
        /* the owner stopped spinning: wake it (a stale wake of a later owner is harmless) */
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->left);
        pthread_mutex_unlock(&pool->mu);
    }
}

/* this thread's index in its pool (oi_pool_slot): set once by each worker as it starts */
static _Thread_local int pool_slot;

int oi_pool_slot(void) { return pool_slot; }

static void *worker(void *p) {
    oi_pool *pool = p;
    pool_slot = atomic_fetch_add_explicit(&pool->numbered, 1, memory_order_relaxed) + 1;
    uint_fast64_t seen = 0;   /* last job joined (or found closed) */
    for (;;) {
        /* Spin phase, no lock: join every newly opened job; leave for a queued task, shutdown,
         * or when the spin budget is spent. */
        uint64_t start = oi_now_ns();
        unsigned spins = 0;
        for (;;) {
            uint_fast64_t g = atomic_load_explicit(&pool->gen, memory_order_acquire);
            if ((g & 1u) && g != seen) {
                seen = g;
                join_job(pool, g);
                start = oi_now_ns();
                continue;
            }
            if (atomic_load_explicit(&pool->queued, memory_order_relaxed) > 0 ||
                atomic_load_explicit(&pool->stop, memory_order_relaxed))
                break;
            if (++spins % OI_SPIN_YIELD_EVERY == 0) sched_yield();   /* let a waiting thread run */
            else cpu_relax();
            if (spins % 64u == 0 && oi_now_ns() - start >= pool->spin_ns &&
                (pool->spin_ns == 0 || !atomic_load_explicit(&pool->held, memory_order_relaxed)))
                break;
        }
        pthread_mutex_lock(&pool->mu);
        if (pool->head) {
            task *t = pool->head;
            pool->head = t->next;
            if (!pool->head) pool->tail = NULL;
            atomic_fetch_sub_explicit(&pool->queued, 1, memory_order_relaxed);
            pthread_mutex_unlock(&pool->mu);
            t->fn(t->arg);
            pthread_mutex_lock(&pool->mu);
            release_slot_locked(pool, t);
            if (--pool->pending == 0) pthread_cond_broadcast(&pool->idle);
            pthread_mutex_unlock(&pool->mu);
            continue;
        }
        if (atomic_load_explicit(&pool->stop, memory_order_relaxed)) { /* queue drained */
            pthread_mutex_unlock(&pool->mu);
            break;
        }
        /* Sleep phase: announce, then re-check the slot (pairs with the owner's store of `gen`
         * then load of `sleepers`); tasks and stop are under mu, so they cannot be missed. */
        atomic_fetch_add_explicit(&pool->sleepers, 1, memory_order_seq_cst);
        uint_fast64_t g = atomic_load_explicit(&pool->gen, memory_order_seq_cst);
        if (!((g & 1u) && g != seen)) pthread_cond_wait(&pool->work, &pool->mu);
        atomic_fetch_sub_explicit(&pool->sleepers, 1, memory_order_relaxed);
        pthread_mutex_unlock(&pool->mu);
    }
    return NULL;
}

oi_status oi_pool_create(int threads, oi_pool **out) {
    if (!out) return OI_ERR_INVALID_ARGUMENT;
    *out = NULL;
    /* OI_ALIGN-aligned: the slot's cache-line alignment must hold on the heap too */
    oi_pool *pool = oi_aligned_alloc(sizeof *pool);
    if (!pool) return OI_ERR_OUT_OF_MEMORY;
    atomic_init(&pool->stop, 0);
    atomic_init(&pool->queued, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->inside, 0);
    atomic_init(&pool->owner_waiting, 0);
    atomic_init(&pool->busy, 0);
    atomic_init(&pool->numbered, 0);
    atomic_init(&pool->held, 0);
    atomic_init(&pool->job.next, 0);
    if (pthread_mutex_init(&pool->mu, NULL) != 0) {
        oi_aligned_free(pool);
        return OI_ERR_THREAD;
    }
    if (pthread_cond_init(&pool->work, NULL) != 0) {
        pthread_mutex_destroy(&pool->mu);
        oi_aligned_free(pool);
        return OI_ERR_THREAD;
    }
    if (pthread_cond_init(&pool->idle, NULL) != 0) {
        pthread_cond_destroy(&pool->work);
        pthread_mutex_destroy(&pool->mu);
        oi_aligned_free(pool);
        return OI_ERR_THREAD;
    }
    if (pthread_cond_init(&pool->left, NULL) != 0) {
        pthread_cond_destroy(&pool->idle);
        pthread_cond_destroy(&pool->work);
        pthread_mutex_destroy(&pool->mu);
        oi_aligned_free(pool);
        return OI_ERR_THREAD;
    }
    /* The calling thread is one of the `threads`: it runs its share of parallel_for itself. */
    int workers = threads > 1 ? threads - 1 : 0;
    /* Spinning only pays when every thread has a CPU: oversubscribed, a spinning worker takes
     * the CPU from a thread with work, so the workers sleep at once (the pre-spin behaviour). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pool->spin_ns = cpus > 0 && threads > cpus ? 0 : OI_POOL_SPIN_NS;
    if (workers) {
        size_t n_slots = (size_t)threads * OI_POOL_TASK_SLOTS;
        pool->threads = calloc((size_t)workers, sizeof(pthread_t));
        pool->slots = calloc(n_slots, sizeof(task));
        if (!pool->threads || !pool->slots) {
            oi_pool_destroy(pool);
            return OI_ERR_OUT_OF_MEMORY;
        }
        for (size_t i = 0; i < n_slots; ++i) pool->slots[i].next = i + 1 < n_slots ? &pool->slots[i + 1] : NULL;
        pool->free_tasks = pool->slots;
        for (int i = 0; i < workers; ++i) {
            if (pthread_create(&pool->threads[i], NULL, worker, pool) != 0) {
                oi_pool_destroy(pool);
                return OI_ERR_THREAD;
            }
            pool->n_threads++;
        }
    }
    *out = pool;
    return OI_OK;
}

void oi_pool_destroy(oi_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    atomic_store_explicit(&pool->stop, 1, memory_order_relaxed);
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->mu);
    /* workers drain the queue, then exit */
    for (int i = 0; i < pool->n_threads; ++i) pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->work);
    pthread_cond_destroy(&pool->idle);
    pthread_cond_destroy(&pool->left);
    pthread_mutex_destroy(&pool->mu);
    free(pool->threads);
    free(pool->slots);
    oi_aligned_free(pool);
}

int oi_pool_threads(const oi_pool *pool) { return pool ? pool->n_threads + 1 : 1; }

/* Appends `t` to the queue; caller holds mu. */
static void enqueue_locked(oi_pool *pool, task *t) {
    if (pool->tail) pool->tail->next = t; else pool->head = t;
    pool->tail = t;
    pool->pending++;
    atomic_fetch_add_explicit(&pool->queued, 1, memory_order_relaxed);
    pthread_cond_signal(&pool->work);
}

oi_status oi_pool_submit(oi_pool *pool, oi_task_fn fn, void *arg) {
    if (!pool || pool->n_threads == 0) { /* no workers: run inline, in submission order */
        fn(arg);
        return OI_OK;
    }
    pthread_mutex_lock(&pool->mu);
    task *t = take_slot_locked(pool);
    if (!t) {                            /* every slot in use: run it here, as without workers */
        pthread_mutex_unlock(&pool->mu);
        fn(arg);
        return OI_OK;
    }
    t->fn = fn;
    t->arg = arg;
    t->next = NULL;
    enqueue_locked(pool, t);
    pthread_mutex_unlock(&pool->mu);
    return OI_OK;
}

void oi_pool_wait(oi_pool *pool) {
    if (!pool || pool->n_threads == 0) return;
    pthread_mutex_lock(&pool->mu);
    while (pool->pending > 0) pthread_cond_wait(&pool->idle, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

/* ---- parallel_for, slot busy: helper tasks through the queue (see the comment above) ---- */

typedef struct range_job {
    range r;
    int64_t outstanding;      /* helper tasks submitted and neither finished nor unqueued */
    pthread_mutex_t mu;
    pthread_cond_t done;
} range_job;

static void range_helper(void *arg) {
    range_job *job = arg;
    run_range(&job->r);
    pthread_mutex_lock(&job->mu);
    if (--job->outstanding == 0) pthread_cond_broadcast(&job->done);
    pthread_mutex_unlock(&job->mu);
}

/* Remove queued-but-not-started helper tasks of `job`; returns how many were removed. */
static int64_t unqueue(oi_pool *pool, range_job *job) {
    int64_t removed = 0;
    pthread_mutex_lock(&pool->mu);
    task **pp = &pool->head, *prev = NULL;
    while (*pp) {
        task *t = *pp;
        if (t->fn == range_helper && t->arg == job) {
            *pp = t->next;
            release_slot_locked(pool, t);
            removed++;
            pool->pending--;
            atomic_fetch_sub_explicit(&pool->queued, 1, memory_order_relaxed);
            continue;
        }
        prev = t;
        pp = &t->next;
    }
    pool->tail = prev;
    if (pool->pending == 0) pthread_cond_broadcast(&pool->idle);
    pthread_mutex_unlock(&pool->mu);
    return removed;
}

static void parallel_for_queued(oi_pool *pool, range_job *job, int helpers) {
    int submitted = 0;
    for (int i = 0; i < helpers; ++i) {
        pthread_mutex_lock(&pool->mu);
        task *t = take_slot_locked(pool);
        pthread_mutex_unlock(&pool->mu);
        if (!t) break; /* fewer helpers: the caller does more of the work */
        t->fn = range_helper;
        t->arg = job;
        t->next = NULL;
        /* counted before it is queued: a helper may run and finish before this loop ends */
        pthread_mutex_lock(&job->mu);
        job->outstanding++;
        pthread_mutex_unlock(&job->mu);
        pthread_mutex_lock(&pool->mu);
        enqueue_locked(pool, t);
        pthread_mutex_unlock(&pool->mu);
        submitted++;
    }
    run_range(&job->r);
    if (submitted) {
        int64_t removed = unqueue(pool, job);
        /* Helpers a worker already took finish (they find no chunk left or end their last one);
         * the job lives on this stack, so wait for every one of them. */
        pthread_mutex_lock(&job->mu);
        job->outstanding -= removed;
        while (job->outstanding > 0) pthread_cond_wait(&job->done, &job->mu);
        pthread_mutex_unlock(&job->mu);
    }
}

void oi_pool_hold_awake(oi_pool *pool, int on) {
    if (!pool) return;
    atomic_store_explicit(&pool->held, on != 0, memory_order_relaxed);
    if (on && pool->spin_ns > 0 && atomic_load_explicit(&pool->sleepers, memory_order_seq_cst) > 0) {
        /* a sleeper wakes, finds no job and spins again (held: until released); one that is
         * falling asleep just now (not yet counted) wakes at the next job as usual */
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->work);
        pthread_mutex_unlock(&pool->mu);
    }
}

/* ---- parallel_for ---- */

void oi_pool_parallel_for(oi_pool *pool, int64_t n, int64_t grain, oi_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!pool || pool->n_threads == 0 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    /* Chunks are whole multiples of `grain` (so chunk boundaries stay where the kernel expects
     * them), about OI_CHUNKS_PER_THREAD per thread: enough for dynamic balance when a thread is
     * late or descheduled, few enough that claiming (one shared atomic) stays negligible. */
    const int threads = pool->n_threads + 1;
    const int64_t units = n / grain + (n % grain != 0);
    const int64_t want = (int64_t)threads * OI_CHUNKS_PER_THREAD;
    const int64_t chunk = grain * (units > want ? units / want : 1);
    const int64_t nchunks = n / chunk + (n % chunk != 0);
    const int helpers = (int)(nchunks - 1 < pool->n_threads ? nchunks - 1 : pool->n_threads);

    if (atomic_exchange_explicit(&pool->busy, 1, memory_order_acquire) != 0) {
        /* another parallel_for (a concurrent consumer task, or an enclosing one) owns the slot */
        range_job job = {{fn, ctx, n, chunk, nchunks, 0}, 0, PTHREAD_MUTEX_INITIALIZER,
                         PTHREAD_COND_INITIALIZER};
        parallel_for_queued(pool, &job, helpers);
        pthread_mutex_destroy(&job.mu);
        pthread_cond_destroy(&job.done);
        return;
    }
    pool->job.fn = fn;
    pool->job.ctx = ctx;
    pool->job.n = n;
    pool->job.chunk = chunk;
    pool->job.nchunks = nchunks;
    atomic_store_explicit(&pool->job.next, 0, memory_order_relaxed);
    /* only the owner writes gen, and busy's acquire ordered us after the previous owner */
    const uint_fast64_t g = atomic_load_explicit(&pool->gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&pool->gen, g, memory_order_seq_cst);          /* open */
    if (atomic_load_explicit(&pool->sleepers, memory_order_seq_cst) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->work);
        pthread_mutex_unlock(&pool->mu);
    }
    run_range(&pool->job);
    atomic_store_explicit(&pool->gen, g + 1, memory_order_seq_cst);      /* close */
    /* Wait for the workers still inside (running their last chunk): spin for the spin budget,
     * then sleep on `left` (the owner_waiting / inside pairing is the Dekker one again). */
    if (atomic_load_explicit(&pool->inside, memory_order_seq_cst) != 0) {
        uint64_t start = oi_now_ns();
        unsigned spins = 0;
        while (atomic_load_explicit(&pool->inside, memory_order_seq_cst) != 0) {
            cpu_relax();
            if (++spins % 64u == 0 && oi_now_ns() - start >= pool->spin_ns) {
                atomic_store_explicit(&pool->owner_waiting, 1, memory_order_seq_cst);
                pthread_mutex_lock(&pool->mu);
                while (atomic_load_explicit(&pool->inside, memory_order_seq_cst) != 0)
                    pthread_cond_wait(&pool->left, &pool->mu);
                pthread_mutex_unlock(&pool->mu);
                atomic_store_explicit(&pool->owner_waiting, 0, memory_order_relaxed);
                break;
            }
        }
    }
    atomic_store_explicit(&pool->busy, 0, memory_order_release);
}
