/*
 * oi_hal_baremetal.c — the HAL's operating-system half on a microcontroller, where there is none:
 * no heap, no files, no clock the HAL knows, one thread. It replaces oi_hal.c (Linux / POSIX) and
 * links with oi_hal_core.c (status strings, the .oinf reader over memory, the CPU check), so a
 * program generated for a bare-metal descriptor runs through the same calls, restricted to what a
 * firmware has:
 *
 *   - memory: the caller owns all of it. `NAME_create_in()` takes the context, arena and
 *     persistent buffers (sized by NAME_CONTEXT_BYTES, NAME_ARENA_BYTES, NAME_PERSISTENT_BYTES)
 *     and the weights image, typically a `const` array the linker puts in flash. oi_aligned_alloc
 *     has no heap to take from and returns NULL, so `NAME_create()` fails with
 *     OI_ERR_OUT_OF_MEMORY instead of pulling malloc into the image.
 *   - files: none; oi_oinf_open / oi_oinf_map fail with OI_ERR_IO (use the image in memory).
 *   - environment: none; oi_env() is NULL, so OI_HOST_ISA and the like are unset.
 *   - time: oi_now_ns() is the user's clock (oi_set_clock), else 0: a trace then reports zero
 *     durations, its node order and values stay exact.
 *   - threads: one. The pool is absent (NULL): parallel_for runs its whole range on the caller,
 *     submitted tasks (yield / await consumer blocks) run inline in submission order, and every
 *     kernel's workspace is the caller's (slot 0).
 *
 * See oi_hal.h for the contract of each function.
 */
#include "oi_hal.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------ memory */

void *oi_aligned_alloc(size_t bytes) {
    (void)bytes;
    return NULL;
}

void oi_aligned_free(void *ptr) { (void)ptr; }

/* ------------------------------------------------------------------------------------------ environment */

const char *oi_env(const char *name) {
    (void)name;
    return NULL;
}

/* ------------------------------------------------------------------------------------------ .oinf files */

oi_status oi_oinf_open(const char *path, oi_oinf *out) {
    (void)path;
    if (out) memset(out, 0, sizeof *out);
    return OI_ERR_IO;
}

oi_status oi_oinf_map(const char *path, oi_oinf *out) {
    return oi_oinf_open(path, out);
}

void oi_oinf_close(oi_oinf *f) {
    if (f) memset(f, 0, sizeof *f);     /* the image is the caller's: nothing to release */
}

/* ------------------------------------------------------------------------------------------ time */

static uint64_t (*user_clock)(void);

void oi_set_clock(uint64_t (*now_ns)(void)) { user_clock = now_ns; }

uint64_t oi_now_ns(void) { return user_clock ? user_clock() : 0; }

/* ------------------------------------------------------------------------------------------ threads */

int oi_default_threads(int fallback) {
    (void)fallback;
    return 1;
}

oi_status oi_pool_create(int threads, oi_pool **out) {
    (void)threads;
    if (!out) return OI_ERR_INVALID_ARGUMENT;
    *out = NULL;                        /* no workers: the caller runs everything */
    return OI_OK;
}

void oi_pool_destroy(oi_pool *pool) { (void)pool; }

int oi_pool_threads(const oi_pool *pool) {
    (void)pool;
    return 1;
}

oi_status oi_pool_submit(oi_pool *pool, oi_task_fn fn, void *arg) {
    (void)pool;
    fn(arg);
    return OI_OK;
}

void oi_pool_wait(oi_pool *pool) { (void)pool; }

void oi_pool_parallel_for(oi_pool *pool, int64_t n, int64_t grain, oi_range_fn fn, void *ctx) {
    (void)pool;
    (void)grain;
    if (n > 0) fn(ctx, 0, n);
}

void oi_pool_hold_awake(oi_pool *pool, int on) {
    (void)pool;
    (void)on;
}

int oi_pool_slot(void) { return 0; }
