/*
 * oi_hal.h — the thin hardware abstraction layer under every program OpenInfer generates.
 *
 * Generated code calls the HAL; the HAL never knows about models. It provides what every
 * generated program needs and nothing more: status codes with messages, aligned allocation,
 * a bounds-checked reader of `.oinf` model packages (the file, or caller memory), a monotonic timer,
 * and a small thread pool (yield/await consumers, parallel kernels).
 *
 * Versioning: OI_HAL_ABI_VERSION changes whenever a struct layout or a function signature in
 * this header changes; generated code checks it at compile time, so a program generated for one
 * HAL never links against another silently.
 */
#ifndef OI_HAL_H
#define OI_HAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OI_HAL_ABI_VERSION 7

/* ------------------------------------------------------------------------------------------
 * Status codes. Every fallible call returns one; nothing in the HAL or in generated code aborts.
 * Values are stable (they cross the C ABI into Python and user programs).
 * ---------------------------------------------------------------------------------------- */
typedef enum oi_status {
    OI_OK = 0,
    OI_ERR_INVALID_ARGUMENT = 1,  /* NULL pointer, unknown variable id, wrong byte count        */
    OI_ERR_OUT_OF_MEMORY = 2,     /* an allocation failed                                        */
    OI_ERR_IO = 3,                /* the model file could not be opened / mapped                 */
    OI_ERR_MODEL_FORMAT = 4,      /* the .oinf is malformed (bad magic, offsets past the end...) */
    OI_ERR_MODEL_MISMATCH = 5,    /* a tensor the program needs is missing or has another type   */
    OI_ERR_INPUT_NOT_SET = 6,     /* step() before every dynamic input was set since last step   */
    OI_ERR_TABLE_FULL = 7,        /* a persistent table index reached its @fixed size            */
    OI_ERR_INDEX_OUT_OF_RANGE = 8,/* a cache index / slice / gather index outside its bounds     */
    OI_ERR_DEVICE = 9,            /* the compute device failed (Vulkan targets)                  */
    OI_ERR_THREAD = 10,           /* the thread pool could not start or run a task               */
    OI_ERR_ABI = 11,              /* library and caller disagree on the ABI version              */
    OI_ERR_UNSUPPORTED_CPU = 12,  /* the CPU or OS lacks an ISA extension the program was built for */
    OI_ERR_SIZE_OUT_OF_RANGE = 13 /* set_size: a dynamic size outside the range it was generated for */
} oi_status;

/* A static, human-readable description of a status code. */
const char *oi_status_str(oi_status status);

/* Formats into buf (cap bytes, always NUL-terminated, cut to fit) the conversions a generated
 * program's error messages use: %s %d %u %zu %llu %p and %%. Why not vsnprintf: a C library's
 * formatter with floats and locales is several KB of a microcontroller's flash (newlib-nano's
 * also references malloc); this one is a few hundred bytes and never allocates. */
void oi_vformat(char *buf, size_t cap, const char *fmt, va_list args);

/* ------------------------------------------------------------------------------------------
 * Memory. All buffers the generated code allocates are OI_ALIGN-aligned so vector kernels can
 * use aligned loads on arena buffers (offsets in the memory plan are multiples of it too).
 * ---------------------------------------------------------------------------------------- */
#define OI_ALIGN 64

/* A kernel's dynamic-size parameters (`int64_t sz_S`): passed to every kernel whose shapes
 * depend on the size, though a kernel may need only some of them (a slice of the first row). */
#if defined(__GNUC__) || defined(__clang__)
#define OI_MAYBE_UNUSED __attribute__((unused))
#else
#define OI_MAYBE_UNUSED
#endif

void *oi_aligned_alloc(size_t bytes);   /* zero-filled; NULL on failure or bytes == 0 */
void oi_aligned_free(void *ptr);

/* ------------------------------------------------------------------------------------------
 * The .oinf reader. Opening maps the file (or wraps caller memory) and validates the header and
 * all tables against the file size; every offset is bounds-checked, so a corrupted or hostile
 * file yields OI_ERR_MODEL_FORMAT, never an out-of-bounds read. It accepts exactly the files
 * `openinfer oinf verify` accepts (docs/oinf.md). Tensor data is used in place.
 * Contract of oi_oinf_open: the file must not be truncated or rewritten in place while it is open;
 * the mapping then has pages past the file's end, and reading one raises SIGBUS (the process
 * dies). Replacing the file by rename is safe; to rule this out, read the file into memory and
 * use oi_oinf_open_memory.
 * ---------------------------------------------------------------------------------------- */
typedef struct oi_oinf_tensor {
    const char *name;           /* points into the file image; not NUL-terminated: see name_len */
    uint32_t name_len;
    uint32_t dtype;             /* .oinf ValueType code (digest §1.4)                            */
    uint32_t ndim;
    uint64_t dims[8];           /* ndim <= 8 is enforced at open                                  */
    const void *data;           /* NULL when the tensor has no data                               */
    uint64_t nbytes;            /* payload bytes (packed types: ceil(numel*bits/8))              */
    const void *quant;          /* v2 quant payload (48-byte header, f32 scales, i32 zero points),
                                   NULL without: quantized weights are dequantized by kernels,
                                   which read the scales from here (ABI 2)                       */
    uint64_t quant_nbytes;
} oi_oinf_tensor;

/* An opened package. Opening validates every table entry once; lookups walk the (validated)
 * tensor table again instead of keeping an index, so the reader never allocates: generated
 * programs can run with no heap at all (see the `*_create_in` entry points). */
typedef struct oi_oinf {
    const uint8_t *base;        /* the file image                                                 */
    uint64_t size;
    uint32_t version;           /* 1 or 2                                                         */
    uint32_t n_tensors;
    uint64_t off_tensors;       /* start and end of the tensor table                              */
    uint64_t off_data;
    int mapped;                 /* ours to unmap on close: 1 a mapping of the file, 2 the file read
                                 * into memory on 2 MiB pages (oi_oinf_open); 0 the caller's memory */
} oi_oinf;

/* Opens a package file: maps it, or, where the OS has transparent huge pages (Linux), reads a file
 * of 4 MiB or more into private read-only memory on 2 MiB pages, which a kernel streaming the
 * weights crosses 512x less often (oi_hal.c, advise_huge). oi_aligned_alloc puts buffers of 4 MiB
 * or more on such pages too. */
oi_status oi_oinf_open(const char *path, oi_oinf *out);
/* Opens a package file by mapping it, whatever its size: pages are read when a kernel first
 * touches them, and, the file being their backing store, the kernel may drop them again under
 * memory pressure. The huge pages oi_oinf_open reads a large file into are anonymous memory,
 * which is never evicted: a 1.5 GB model on a 2 GB board would not fit. A descriptor's
 * `preferences.weights_memory: "mapped"` makes the generated create() use this (the default on
 * the Arm descriptors), at the cost of more TLB misses while weights stream. */
oi_status oi_oinf_map(const char *path, oi_oinf *out);
/* Opens a package image in the caller's memory (used in place; it must outlive the oi_oinf): it
 * must be 8-aligned, as the file's blobs are, else OI_ERR_INVALID_ARGUMENT (an image placed by
 * hand in a microcontroller's flash at a misaligned address would fault in the first kernel). */
oi_status oi_oinf_open_memory(const void *image, uint64_t size, oi_oinf *out);
void oi_oinf_close(oi_oinf *file);

/* Tensor `index` (file order, < n_tensors) of an opened file. */
oi_status oi_oinf_tensor_at(const oi_oinf *file, uint32_t index, oi_oinf_tensor *out);

/* Finds tensor `name` and checks it has data, dtype `dtype` and exactly `nbytes` payload bytes;
 * OI_ERR_MODEL_MISMATCH otherwise. A quant key, `W#scale` (f32) or `W#zero_point` (i32), names
 * the scales or zero points inside tensor W's quant payload, as the Python reader's
 * Model.quant_keys do; a malformed payload is OI_ERR_MODEL_FORMAT. */
oi_status oi_oinf_require(const oi_oinf *file, const char *name, uint32_t dtype, uint64_t nbytes,
                          const void **data);

/* The value of environment variable `name`, or NULL when it is unset or there is no environment
 * (the bare-metal HAL: a firmware has none, and getenv would link newlib's environment code). The
 * core reads its settings through it (OI_HOST_ISA, OI_STREAM_PREFETCH). */
const char *oi_env(const char *name);

/* ------------------------------------------------------------------------------------------
 * Time and tracing.
 * ---------------------------------------------------------------------------------------- */
uint64_t oi_now_ns(void);
/* The bare-metal HAL only (oi_hal_baremetal.c): a microcontroller has no clock the HAL knows, so
 * oi_now_ns() returns the user's (a cycle counter scaled to ns: DWT->CYCCNT, SysTick, a timer),
 * or 0 without one (traces then report zero durations). */
void oi_set_clock(uint64_t (*now_ns)(void));

/* Called by generated code after each executed node when a hook is installed: `node_index` is
 * the graph node's index, `block` its block name; the hook may read variables through the
 * model's get() before returning. Used to bisect divergence against the reference. */
typedef void (*oi_trace_hook)(void *user, int32_t node_index, const char *block, uint64_t duration_ns);

/* ------------------------------------------------------------------------------------------
 * Thread pool: a fixed set of workers running submitted tasks. The size comes from the device
 * descriptor at generation time and OI_NUM_THREADS at run time (see oi_default_threads).
 * ---------------------------------------------------------------------------------------- */
typedef struct oi_pool oi_pool;
typedef void (*oi_task_fn)(void *arg);

/* Threads to use: OI_NUM_THREADS when set to a positive integer, else `fallback`. */
int oi_default_threads(int fallback);

oi_status oi_pool_create(int threads, oi_pool **out);   /* threads <= 1: tasks run inline */
void oi_pool_destroy(oi_pool *pool);
int oi_pool_threads(const oi_pool *pool);
/* Queue one task; oi_pool_wait() blocks until every queued task has finished. */
oi_status oi_pool_submit(oi_pool *pool, oi_task_fn fn, void *arg);
void oi_pool_wait(oi_pool *pool);
/* Runs fn(ctx, i) for i in [0, n) split over the pool (the caller's thread takes a share), in
 * ranges whose bounds are multiples of `grain` (the last may end at n). For low latency between
 * kernels, idle workers spin for ~100 us after each parallel_for before they sleep (never when
 * the pool has more threads than the machine has CPUs). */
typedef void (*oi_range_fn)(void *ctx, int64_t begin, int64_t end);
void oi_pool_parallel_for(oi_pool *pool, int64_t n, int64_t grain, oi_range_fn fn, void *ctx);

/* While held (on != 0), idle workers keep spinning past that budget instead of sleeping (still
 * never when the pool has more threads than CPUs), and sleeping ones are woken to spin. Why: a
 * trace hook runs between a step's nodes (a Python callback takes microseconds a node); in those
 * gaps the workers would fall asleep and the next parallel kernel would pay their wake-up, so a
 * per-node profile would time kernels slower than the untraced step runs them. Generated
 * programs hold their pool while a trace hook is installed. NULL: nothing. */
void oi_pool_hold_awake(oi_pool *pool, int on);

/* Which thread of its pool the calling thread is: k for the pool's k-th worker (1..), 0 for any
 * other thread (the one that calls step()). A pool's work runs on its workers and its caller. */
int oi_pool_slot(void);

/* What every generated kernel receives.
 *   pool            the pool to split its work over (NULL: run serially)
 *   scratch         workspace of the calling thread (slot 0): `scratch_bytes` bytes, 64-aligned
 *   worker_scratch  the workers' workspace, `scratch_bytes` each, worker k's at (k - 1) * bytes
 *   scratch_bytes   the most any kernel of the program takes (0: none does)
 * Why: a kernel that needs room beyond its operands (a packed panel of B, a zero-padded copy of
 * an input, a block's scores) takes it here instead of from the heap, so a step never allocates;
 * the program sizes the workspace when it is generated and allocates it with the pool, at
 * create() (the caller's inside the context object, so create_in() needs no heap either). A
 * thread runs one kernel's work at a time, so one workspace per thread suffices. */
typedef struct oi_kctx {
    oi_pool *pool;
    uint8_t *scratch;
    uint8_t *worker_scratch;
    size_t scratch_bytes;
} oi_kctx;

/* The calling thread's workspace (see oi_kctx). */
static inline void *oi_kctx_scratch(const oi_kctx *ctx) {
    const int slot = oi_pool_slot();
    return slot == 0 ? (void *)ctx->scratch : (void *)(ctx->worker_scratch + (size_t)(slot - 1) * ctx->scratch_bytes);
}

/* ------------------------------------------------------------------------------------------
 * CPU features. Code compiled for AVX2, AVX-512 or Armv8.2-A dies with SIGILL on a CPU without
 * them, at whichever such instruction comes first; so a generated program's create() checks the
 * features its kernels were compiled for (its header's *_CPU_FEATURES) before it runs anything
 * else, and fails with OI_ERR_UNSUPPORTED_CPU. On x86-64 a feature counts only when the CPU has it
 * (cpuid) and the OS saves its registers on a context switch (XCR0); on Linux/AArch64 when the
 * kernel reports it in the auxiliary vector (getauxval(AT_HWCAP), AT_HWCAP2), which it does only
 * for what it supports. These functions are compiled for the architecture's baseline (x86-64,
 * Armv8-A) whatever the program's flags, so the check itself runs on any CPU of it. Other
 * architectures (32-bit Arm included: its one descriptor is portable C) report no feature.
 *
 * OI_HOST_ISA=<a family of OI_CPU_FAMILIES> in the environment caps what is reported, so that a
 * test suite can run as on a smaller CPU; it never adds a feature the CPU lacks (an unknown value
 * counts as generic, the safe side). Bit values are stable: generated headers record their
 * program's mask.
 *
 * OI_CPU_FEATURE_TABLE is the one list the HAL reads (openinfer/targets/isa.py states the same
 * rows for the generator; tests/synth/test_isa_table.py holds them together): per feature its
 * bit, its name as descriptors spell it, the kernel family that brings it (OI_HOST_ISA=<an
 * earlier family of OI_CPU_FAMILIES, narrowest first> hides it), where x86 reports it: cpuid
 * leaf (0: not an x86 feature), sub-leaf, register (0 eax .. 3 edx), bit, and the XCR0 state the
 * OS must save for it (0: none); and where Linux/AArch64 reports it: the auxiliary-vector word
 * (1 AT_HWCAP, 2 AT_HWCAP2; 0: not an AArch64 feature) and its bit there (HWCAP_* of the kernel's
 * arch/arm64/include/uapi/asm/hwcap.h). A new feature of a known architecture is a bit and a row.
 * ---------------------------------------------------------------------------------------- */
#define OI_CPU_AVX         (1u << 0)
#define OI_CPU_AVX2        (1u << 1)
#define OI_CPU_FMA         (1u << 2)
#define OI_CPU_F16C        (1u << 3)
#define OI_CPU_AVX512F     (1u << 4)
#define OI_CPU_AVX512BW    (1u << 5)
#define OI_CPU_AVX512VL    (1u << 6)
#define OI_CPU_AVX512DQ    (1u << 7)
#define OI_CPU_AVX512_BF16 (1u << 8)
#define OI_CPU_AVX512_FP16 (1u << 9)
#define OI_CPU_SSE42       (1u << 10)
#define OI_CPU_ASIMD       (1u << 11)
#define OI_CPU_ASIMDDP     (1u << 12)
#define OI_CPU_FPHP        (1u << 13)
#define OI_CPU_ASIMDHP     (1u << 14)
#define OI_CPU_AVX512_VNNI (1u << 15)

#define OI_CPU_FAMILIES(X) X("generic") X("avx2") X("avx512") X("neon") X("v82") X("cortex-m") X("cortex-m-v8m") X("helium")

/*   X(bit,               name,          family,    leaf, sub, reg, bit, xcr0, auxv, bit) */
#define OI_CPU_FEATURE_TABLE(X) \
    X(OI_CPU_SSE42,       "sse4.2",      "generic", 1, 0, 2, 20, 0x00, 0, 0)  \
    X(OI_CPU_AVX,         "avx",         "avx2",    1, 0, 2, 28, 0x06, 0, 0)  \
    X(OI_CPU_AVX2,        "avx2",        "avx2",    7, 0, 1, 5,  0x06, 0, 0)  \
    X(OI_CPU_FMA,         "fma",         "avx2",    1, 0, 2, 12, 0x06, 0, 0)  \
    X(OI_CPU_F16C,        "f16c",        "avx2",    1, 0, 2, 29, 0x06, 0, 0)  \
    X(OI_CPU_AVX512F,     "avx512f",     "avx512",  7, 0, 1, 16, 0xE6, 0, 0)  \
    X(OI_CPU_AVX512BW,    "avx512bw",    "avx512",  7, 0, 1, 30, 0xE6, 0, 0)  \
    X(OI_CPU_AVX512VL,    "avx512vl",    "avx512",  7, 0, 1, 31, 0xE6, 0, 0)  \
    X(OI_CPU_AVX512DQ,    "avx512dq",    "avx512",  7, 0, 1, 17, 0xE6, 0, 0)  \
    X(OI_CPU_AVX512_BF16, "avx512_bf16", "avx512",  7, 1, 0, 5,  0xE6, 0, 0)  \
    X(OI_CPU_AVX512_FP16, "avx512_fp16", "avx512",  7, 0, 3, 23, 0xE6, 0, 0)  \
    X(OI_CPU_AVX512_VNNI, "avx512_vnni", "avx512",  7, 0, 2, 11, 0xE6, 0, 0)  \
    X(OI_CPU_ASIMD,       "asimd",       "neon",    0, 0, 0, 0,  0x00, 1, 1)  \
    X(OI_CPU_ASIMDDP,     "asimddp",     "v82",     0, 0, 0, 0,  0x00, 1, 20) \
    X(OI_CPU_FPHP,        "fphp",        "v82",     0, 0, 0, 0,  0x00, 1, 9)  \
    X(OI_CPU_ASIMDHP,     "asimdhp",     "v82",     0, 0, 0, 0,  0x00, 1, 10)

/* The OI_CPU_* features of this CPU and OS (0 on other architectures), capped by OI_HOST_ISA. */
uint32_t oi_cpu_features(void);
/* OI_OK when every feature of `required` is present; else OI_ERR_UNSUPPORTED_CPU, and when `buf`
 * is not NULL the missing features' names ("avx512f avx512bw"), NUL-terminated, cut to `cap`. */
oi_status oi_cpu_require(uint32_t required, char *buf, size_t cap);
/* 1 where a vecmat's software prefetch of its streams' next rows pays on this CPU, else 0: the
 * generated kernels of a descriptor whose `stream_prefetch` preference is "cpu" (x86_64-avx2, whose
 * code runs on CPUs that disagree) ask it. Measured: it pays on AMD Zen 4 and costs Zen 3 and an
 * Intel Xeon, whose hardware prefetchers keep up alone; so 1 on an AMD CPU with AVX-512F (Zen 4
 * and later; Zen 3 has none), as OI_HOST_ISA caps the features. OI_STREAM_PREFETCH=1 or 0 in the
 * environment decides instead. Decided once per process. */
int oi_cpu_stream_prefetch(void);

/* Description of one variable of a generated program (its `*_var_info` table). */
typedef struct oi_var_info {
    const char *name;
    uint32_t dtype;             /* .oinf ValueType code                                           */
    uint32_t kind;              /* 0 dynamic, 1 volatile, 2 constant, 3 persistent                */
    uint32_t ndim;
    uint64_t dims[8];
    uint64_t nbytes;            /* bytes set()/get() exchange (packed types: packed bytes)        */
    uint32_t settable;          /* dynamic inputs                                                 */
    uint32_t gettable;
} oi_var_info;

#ifdef __cplusplus
}
#endif
#endif /* OI_HAL_H */
