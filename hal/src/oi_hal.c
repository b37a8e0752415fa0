/*
 * oi_hal.c — status strings, aligned memory, the bounds-checked .oinf reader, timer, thread pool.
 * See oi_hal.h for the contract of each function.
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
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>           /* getauxval(): the CPU features Linux reports (oi_cpu_detect) */
#endif

const char *oi_status_str(oi_status status) {
    switch (status) {
    case OI_OK: return "ok";
    case OI_ERR_INVALID_ARGUMENT: return "invalid argument (NULL pointer, unknown variable id or wrong byte count)";
    case OI_ERR_OUT_OF_MEMORY: return "out of memory";
    case OI_ERR_IO: return "cannot open or map the model file";
    case OI_ERR_MODEL_FORMAT: return "the model file is not a valid .oinf package";
    case OI_ERR_MODEL_MISMATCH: return "the model lacks a tensor the program needs, or has it with another type or size";
    case OI_ERR_INPUT_NOT_SET: return "a dynamic input was not set before this step";
    case OI_ERR_TABLE_FULL: return "a persistent table index exceeds its fixed size";
    case OI_ERR_INDEX_OUT_OF_RANGE: return "an index or slice is out of range";
    case OI_ERR_DEVICE: return "the compute device reported an error";
    case OI_ERR_THREAD: return "the thread pool failed";
    case OI_ERR_ABI: return "library and caller ABI versions differ";
    case OI_ERR_UNSUPPORTED_CPU: return "this CPU lacks an instruction-set extension the program was compiled for";
    case OI_ERR_SIZE_OUT_OF_RANGE: return "a dynamic size is outside the range the program was generated for";
    }
    return "unknown status";
}

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

/* ------------------------------------------------------------------------------------------ .oinf */

/* Layout constants of digest §1: the 69-byte packed header, padded so tables start at 72. */
#define OINF_HEADER_BYTES 69u
#define OINF_MAX_DIMS 8u
#define OINF_MAX_NUMEL ((uint64_t)1 << 58)

typedef struct reader {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    uint64_t limit;     /* end of the table being read */
} reader;

static int rd_u32(reader *r, uint32_t *v) {
    if (r->pos > r->limit || r->limit - r->pos < 4) return 0;
    memcpy(v, r->base + r->pos, 4); /* tensor-table fields are not naturally aligned (§1.1) */
    r->pos += 4;
    return 1;
}

static int rd_u64(reader *r, uint64_t *v) {
    if (r->pos > r->limit || r->limit - r->pos < 8) return 0;
    memcpy(v, r->base + r->pos, 8);
    r->pos += 8;
    return 1;
}

/* A string: u32 length, bytes, zero padding so 4+len is a multiple of 8 (relative to its start). */
static int rd_string(reader *r, const char **s, uint32_t *len) {
    uint32_t n;
    if (!rd_u32(r, &n) || n == 0) return 0;
    uint64_t padded = ((uint64_t)n + 4u + 7u) / 8u * 8u - 4u;
    if (r->limit - r->pos < padded) return 0;
    for (uint32_t i = 0; i < n; ++i) {
        uint8_t c = r->base[r->pos + i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        if (!ok) return 0;
    }
    *s = (const char *)(r->base + r->pos);
    *len = n;
    r->pos += padded;
    return 1;
}

/* Bits per element of a tensor dtype code, 0 for codes that are not tensor types. */
static uint32_t dtype_bits(uint32_t code) {
    switch (code) {
    case 1: case 5: case 12: case 17: return 8;          /* i8 u8 bool f8 */
    case 2: case 6: case 9: case 16: return 16;          /* i16 u16 f16 bf16 */
    case 3: case 7: case 10: return 32;                  /* i32 u32 f32 */
    case 4: case 8: case 11: return 64;                  /* i64 u64 f64 */
    case 18: case 21: return 4;                          /* i4 u4 */
    case 19: case 22: case 24: return 2;                 /* i2 u2 t2 */
    case 20: case 23: case 25: return 1;                 /* i1 u1 t1 */
    default: return 0;
    }
}

/* Reads the `ndim` dims of a shape (into `dims` unless NULL) and checks the shape rule both readers
 * share (openinfer/oinf/format.py shape_problem): at most 8 dims, and the product of the non-zero
 * dims below 2^58, so numel * 64 bits fits a u64 and NumPy can hold the array. */
static int rd_shape(reader *r, uint32_t ndim, uint64_t *dims, uint64_t *numel) {
    uint64_t nonzero = 1;
    int empty = 0;
    if (ndim > OINF_MAX_DIMS) return 0;
    for (uint32_t d = 0; d < ndim; ++d) {
        uint64_t v;
        if (!rd_u64(r, &v)) return 0;
        if (dims) dims[d] = v;
        if (v == 0) {
            empty = 1;
        } else {
            if (v > (OINF_MAX_NUMEL - 1u) / nonzero) return 0;
            nonzero *= v;
        }
    }
    *numel = empty ? 0 : nonzero;
    return 1;
}

/* Whether `n` elements of dtype `code` stored at `p` are all values: a bool byte must be 0 or 1,
 * and a t2 element must not have the code 0b10; every pattern of every other type is a value. */
static int values_valid(const uint8_t *p, uint32_t code, uint64_t n) {
    if (code == 12) {
        for (uint64_t i = 0; i < n; ++i)
            if (p[i] > 1) return 0;
    } else if (code == 24) {
        for (uint64_t i = 0; i < n; ++i)
            if (((p[i / 4] >> (2 * (i % 4))) & 3u) == 2u) return 0;
    }
    return 1;
}

/* Reads tensor entry `index` starting at *pos (advanced past it) and validates it. */
static oi_status read_entry(const oi_oinf *f, uint64_t *pos, oi_oinf_tensor *t) {
    reader r = {f->base, f->size, *pos, f->off_data};
    uint32_t flags;
    uint64_t off, qn = 0, qo = 0;
    memset(t, 0, sizeof *t);
    if (!rd_string(&r, &t->name, &t->name_len)) return OI_ERR_MODEL_FORMAT;
    if (!rd_u32(&r, &t->dtype) || !rd_u32(&r, &t->ndim) || !rd_u32(&r, &flags)) return OI_ERR_MODEL_FORMAT;
    uint32_t bits = dtype_bits(t->dtype);
    if (bits == 0) return OI_ERR_MODEL_FORMAT;
    if (flags & ~(f->version == 1 ? 1u : 3u)) return OI_ERR_MODEL_FORMAT;
    uint64_t numel;
    if (!rd_shape(&r, t->ndim, t->dims, &numel)) return OI_ERR_MODEL_FORMAT;
    if (!rd_u64(&r, &t->nbytes) || !rd_u64(&r, &off)) return OI_ERR_MODEL_FORMAT;
    if (f->version == 2 && (!rd_u64(&r, &qn) || !rd_u64(&r, &qo))) return OI_ERR_MODEL_FORMAT;
    if (flags & 1u) {
        uint64_t expect = (numel * bits + 7u) / 8u;
        if (t->nbytes != expect || off < f->off_data || off % 8u || off > f->size || f->size - off < t->nbytes)
            return OI_ERR_MODEL_FORMAT;
        t->data = f->base + off;
    } else if (t->nbytes != 0 || off != 0) {
        return OI_ERR_MODEL_FORMAT;
    }
    if (flags & 2u) {
        if (qn < 48u || qo < f->off_data || qo % 8u || qo > f->size || f->size - qo < qn) return OI_ERR_MODEL_FORMAT;
        t->quant = f->base + qo;
        t->quant_nbytes = qn;
    } else if (f->version == 2 && (qn != 0 || qo != 0)) {
        return OI_ERR_MODEL_FORMAT;
    }
    *pos = r.pos;
    return OI_OK;
}

/* ---- Checks run once at open, so that the C reader accepts exactly the files `openinfer oinf
 * verify` accepts (openinfer/oinf/reader.py; tools/fuzz_oinf.py feeds both the same mutants). */

static uint64_t align8(uint64_t n) { return (n + 7u) / 8u * 8u; }

static int name_cmp(const char *a, uint32_t la, const char *b, uint32_t lb) {
    int c = memcmp(a, b, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

/* A blob (metadata value, tensor data, quant payload) is 8-aligned, in the data section, in the file. */
static int blob_in_file(const oi_oinf *f, uint64_t off, uint64_t n) {
    return off % 8u == 0 && off >= f->off_data && off <= f->size && f->size - off >= n;
}

/* A metadata value of type `type` at [off, off + n), already inside the file (digest §1.5): its
 * exact size, and for bool, packed and t2 scalars and ndarrays, that every stored element is a value. */
static int metadata_value_valid(const oi_oinf *f, uint32_t type, uint64_t off, uint64_t n) {
    const uint8_t *p = f->base + off;
    reader r = {f->base, f->size, off, off + n};
    if (type == 14) {                    /* str: one string whose padded encoding is the whole value */
        const char *s;
        uint32_t len;
        return rd_string(&r, &s, &len) && r.pos == off + n;
    }
    if (type == 13) {                    /* bitset: bit_count, byte_count = ceil(bit_count / 8), bytes, pad */
        uint32_t bit_count, byte_count;
        if (n < 8) return 0;
        memcpy(&bit_count, p, 4);
        memcpy(&byte_count, p + 4, 4);
        return byte_count == ((uint64_t)bit_count + 7u) / 8u && n == align8(8u + (uint64_t)byte_count);
    }
    if (type == 15) {                    /* ndarray: element type, ndim, dims, data as a tensor's, pad */
        uint32_t code, ndim;
        uint64_t numel;
        if (n < 8) return 0;
        memcpy(&code, p, 4);
        memcpy(&ndim, p + 4, 4);
        uint32_t bits = dtype_bits(code);
        r.pos = off + 8u;
        if (bits == 0 || 8u + 8u * (uint64_t)ndim > n || !rd_shape(&r, ndim, NULL, &numel)) return 0;
        uint64_t head = 8u + 8u * (uint64_t)ndim;
        return n == align8(head + (numel * bits + 7u) / 8u) && values_valid(p + head, code, numel);
    }
    uint32_t bits = dtype_bits(type);    /* a scalar: its element size, one byte for packed types */
    if (bits == 0 || n != (bits < 8u ? 1u : bits / 8u)) return 0;
    if (bits < 8u && (p[0] >> bits) != 0) return 0;
    return values_valid(p, type, 1);
}

/* A quant payload (digest §1.7): reserved 0, size exactly align8(48 + 4 * (scales + zero points)),
 * valid scheme and modes, axes and counts that fit the tensor's shape. */
static int quant_valid(const oi_oinf_tensor *t) {
    const uint8_t *q = t->quant;
    uint32_t scheme, scale_mode, zp_mode, reserved;
    uint64_t scale_axis, scales, zp_axis, zps, room = t->quant_nbytes - 48u;   /* >= 48: read_entry */
    memcpy(&scheme, q, 4);
    memcpy(&scale_mode, q + 4, 4);
    memcpy(&zp_mode, q + 8, 4);
    memcpy(&reserved, q + 12, 4);
    memcpy(&scale_axis, q + 16, 8);
    memcpy(&scales, q + 24, 8);
    memcpy(&zp_axis, q + 32, 8);
    memcpy(&zps, q + 40, 8);
    if (reserved != 0 || scales > room / 4u || zps > room / 4u - scales) return 0;
    if (t->quant_nbytes != align8(48u + 4u * (scales + zps))) return 0;
    if (scheme < 1 || scheme > 2 || scale_mode < 1 || scale_mode > 2 || zp_mode > 2) return 0;
    if (scale_mode == 1 ? scale_axis != 0 || scales != 1 : scale_axis >= t->ndim || scales != t->dims[scale_axis])
        return 0;
    if (zp_mode == 0 && zps != 0) return 0;
    if (zp_mode == 1 && (scale_mode != 1 || zp_axis != 0 || zps != 1)) return 0;
    if (zp_mode == 2 && (scale_mode != 2 || zp_axis != scale_axis || zps != scales)) return 0;
    return !(scheme == 1 && zp_mode != 0);
}

/* Table kinds, for walking a validated table entry by entry. */
enum { TABLE_SIZEVARS, TABLE_METADATA, TABLE_TENSORS };

/* The name of the entry at r->pos of a validated table; r is advanced past the entry. */
static void next_name(reader *r, int table, uint32_t version, const char **s, uint32_t *len) {
    uint32_t dtype = 0, ndim = 0, flags = 0;
    rd_string(r, s, len);
    if (table == TABLE_SIZEVARS) {
        r->pos += 8u;
    } else if (table == TABLE_METADATA) {
        r->pos += 24u;
    } else {
        rd_u32(r, &dtype);
        rd_u32(r, &ndim);
        rd_u32(r, &flags);
        r->pos += 8u * (uint64_t)ndim + (version == 1 ? 16u : 32u);
    }
}

/* Whether the n entries of a validated table have distinct names. A table sorted by name (as the
 * writer writes it) takes one pass; another order is compared pairwise, without allocating. */
static int names_distinct(const oi_oinf *f, int table, uint64_t start, uint64_t end, uint32_t n) {
    reader a = {f->base, f->size, start, end};
    const char *s, *prev = NULL;
    uint32_t len, prev_len = 0, i;
    for (i = 0; i < n; ++i, prev = s, prev_len = len) {
        next_name(&a, table, f->version, &s, &len);
        if (prev && name_cmp(prev, prev_len, s, len) >= 0) break;
    }
    if (i == n) return 1;
    a.pos = start;
    for (i = 0; i < n; ++i) {
        next_name(&a, table, f->version, &s, &len);
        reader b = {f->base, f->size, start, end};
        for (uint32_t j = 0; j < i; ++j) {
            next_name(&b, table, f->version, &prev, &prev_len);
            if (name_cmp(prev, prev_len, s, len) == 0) return 0;
        }
    }
    return 1;
}

/* Walks the non-empty blobs of a validated file: metadata values in table order, then each
 * tensor's data and quant payload. */
typedef struct blob_walk {
    reader metadata;
    uint32_t metadata_left, tensors_left;
    uint64_t tensor_pos;
    uint64_t quant_off, quant_n;     /* the quant payload of the tensor just read, yielded next */
} blob_walk;

static blob_walk blob_walk_start(const oi_oinf *f, uint64_t off_metadata, uint32_t n_metadata) {
    blob_walk w = {{f->base, f->size, off_metadata, f->off_tensors}, n_metadata, f->n_tensors, f->off_tensors, 0, 0};
    return w;
}

static int next_blob(const oi_oinf *f, blob_walk *w, uint64_t *off, uint64_t *n) {
    for (;;) {
        if (w->quant_n) {
            *off = w->quant_off;
            *n = w->quant_n;
            w->quant_n = 0;
            return 1;
        }
        if (w->metadata_left) {
            const char *s;
            uint32_t len;
            --w->metadata_left;
            *off = *n = 0;
            rd_string(&w->metadata, &s, &len);
            w->metadata.pos += 8u;
            rd_u64(&w->metadata, n);
            rd_u64(&w->metadata, off);
        } else if (w->tensors_left) {
            oi_oinf_tensor t;
            --w->tensors_left;
            read_entry(f, &w->tensor_pos, &t);
            w->quant_off = t.quant ? (uint64_t)((const uint8_t *)t.quant - f->base) : 0;
            w->quant_n = t.quant_nbytes;
            if (!t.data) continue;
            *off = (uint64_t)((const uint8_t *)t.data - f->base);
            *n = t.nbytes;
        } else {
            return 0;
        }
        if (*n) return 1;
    }
}

/* Whether no two blobs share a byte. Blobs laid out in walk order (as the writer lays them out)
 * take one pass; another layout is compared pairwise, without allocating. */
static int blobs_disjoint(const oi_oinf *f, uint64_t off_metadata, uint32_t n_metadata) {
    blob_walk a = blob_walk_start(f, off_metadata, n_metadata);
    uint64_t off = 0, n = 0, end = 0, count = 0;
    int in_order = 1;
    while (next_blob(f, &a, &off, &n)) {
        if (off < end) in_order = 0;
        end = off + n;
        ++count;
    }
    if (in_order) return 1;
    a = blob_walk_start(f, off_metadata, n_metadata);
    for (uint64_t i = 0; i < count; ++i) {
        next_blob(f, &a, &off, &n);
        blob_walk b = blob_walk_start(f, off_metadata, n_metadata);
        uint64_t other = 0, other_n = 0;
        for (uint64_t j = 0; j < i; ++j) {
            next_blob(f, &b, &other, &other_n);
            if (off < other + other_n && other < off + n) return 0;
        }
    }
    return 1;
}

static uint64_t tensor_numel(const oi_oinf_tensor *t) {
    uint64_t numel = 1;
    for (uint32_t d = 0; d < t->ndim; ++d) numel *= t->dims[d];   /* bounded by the shape rule */
    return numel;
}

static oi_status parse(oi_oinf *f) {
    const uint8_t *b = f->base;
    uint64_t size = f->size;
    if (size < 72 || memcmp(b, "OINF\0", 5) != 0) return OI_ERR_MODEL_FORMAT;
    uint32_t version, flags, n_sizevars, n_metadata, n_tensors, reserved;
    uint64_t off_sizevars, off_metadata, off_tensors, off_data, file_size;
    memcpy(&version, b + 5, 4);
    memcpy(&flags, b + 9, 4);
    memcpy(&n_sizevars, b + 13, 4);
    memcpy(&n_metadata, b + 17, 4);
    memcpy(&n_tensors, b + 21, 4);
    memcpy(&reserved, b + 25, 4);
    memcpy(&off_sizevars, b + 29, 8);
    memcpy(&off_metadata, b + 37, 8);
    memcpy(&off_tensors, b + 45, 8);
    memcpy(&off_data, b + 53, 8);
    memcpy(&file_size, b + 61, 8);
    if (version != 1 && version != 2) return OI_ERR_MODEL_FORMAT;
    if (file_size != size || flags != 0 || reserved != 0) return OI_ERR_MODEL_FORMAT;
    if (off_sizevars < OINF_HEADER_BYTES || off_sizevars > off_metadata || off_metadata > off_tensors ||
        off_tensors > off_data || off_data > size)
        return OI_ERR_MODEL_FORMAT;
    if ((off_sizevars | off_metadata | off_tensors | off_data) % 8u) return OI_ERR_MODEL_FORMAT;
    f->version = version;
    f->n_tensors = n_tensors;
    f->off_tensors = off_tensors;
    f->off_data = off_data;
    /* Validate every entry now, so later lookups cannot fail on format. Each entry consumes at
     * least 8 bytes, so a huge count fails at the end of its table, not after 2^32 steps. */
    reader r = {b, size, off_sizevars, off_metadata};
    for (uint32_t i = 0; i < n_sizevars; ++i) {
        const char *name;
        uint32_t len;
        uint64_t value;
        if (!rd_string(&r, &name, &len) || !rd_u64(&r, &value)) return OI_ERR_MODEL_FORMAT;
    }
    r = (reader){b, size, off_metadata, off_tensors};
    for (uint32_t i = 0; i < n_metadata; ++i) {
        const char *key;
        uint32_t len, type, value_flags;
        uint64_t nbytes, off;
        if (!rd_string(&r, &key, &len) || !rd_u32(&r, &type) || !rd_u32(&r, &value_flags) || !rd_u64(&r, &nbytes) ||
            !rd_u64(&r, &off))
            return OI_ERR_MODEL_FORMAT;
        if (value_flags != 0 || !blob_in_file(f, off, nbytes) || !metadata_value_valid(f, type, off, nbytes))
            return OI_ERR_MODEL_FORMAT;
    }
    uint64_t pos = off_tensors;
    oi_oinf_tensor t;
    for (uint32_t i = 0; i < n_tensors; ++i) {
        oi_status st = read_entry(f, &pos, &t);
        if (st != OI_OK) return st;
        if (t.quant && !quant_valid(&t)) return OI_ERR_MODEL_FORMAT;
        if (t.data && !values_valid(t.data, t.dtype, tensor_numel(&t))) return OI_ERR_MODEL_FORMAT;
    }
    if (!names_distinct(f, TABLE_SIZEVARS, off_sizevars, off_metadata, n_sizevars) ||
        !names_distinct(f, TABLE_METADATA, off_metadata, off_tensors, n_metadata) ||
        !names_distinct(f, TABLE_TENSORS, off_tensors, off_data, n_tensors) ||
        !blobs_disjoint(f, off_metadata, n_metadata))
        return OI_ERR_MODEL_FORMAT;
    return OI_OK;
}

oi_status oi_oinf_open_memory(const void *image, uint64_t size, oi_oinf *out) {
    if (!image || !out) return OI_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    out->base = image;
    out->size = size;
    oi_status st = parse(out);
    if (st != OI_OK) oi_oinf_close(out);
    return st;
}

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
    out->mapped = 1;
#ifdef MADV_HUGEPAGE
    if (read_in && (uint64_t)st.st_size >= OI_HUGE_MIN && (uint64_t)st.st_size <= SIZE_MAX - 2 * OI_HUGE_PAGE) {
        p = read_into_huge_pages(fd, (size_t)st.st_size);
        if (p != MAP_FAILED) out->mapped = 2;
    }
#endif
    if (p == MAP_FAILED) p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return OI_ERR_IO;
    out->base = p;
    out->size = (uint64_t)st.st_size;
    oi_status s = parse(out);
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

oi_status oi_oinf_tensor_at(const oi_oinf *f, uint32_t index, oi_oinf_tensor *out) {
    if (!f || !out || index >= f->n_tensors) return OI_ERR_INVALID_ARGUMENT;
    uint64_t pos = f->off_tensors;
    for (uint32_t i = 0;; ++i) {
        oi_status st = read_entry(f, &pos, out);
        if (st != OI_OK || i == index) return st;
    }
}

/* The scales (f32, code 10) or zero points (i32, code 3) of a quant payload: header <IIIIQQQQ>
 * (scheme, scale_mode, zp_mode, reserved, scale_axis, scale_count, zp_axis, zp_count), then
 * f32 scales[scale_count], then i32 zero_points[zp_count] (digest §1.7). */
static oi_status quant_part(const oi_oinf_tensor *t, int zero_points, uint32_t dtype, uint64_t nbytes,
                            const void **data) {
    if (!t->quant) return OI_ERR_MODEL_MISMATCH;
    const uint8_t *q = t->quant;
    uint64_t scales, zps;
    memcpy(&scales, q + 24, 8);
    memcpy(&zps, q + 40, 8);
    if (scales > (t->quant_nbytes - 48u) / 4u || zps > (t->quant_nbytes - 48u) / 4u - scales)
        return OI_ERR_MODEL_FORMAT;
    uint64_t count = zero_points ? zps : scales;
    if (dtype != (zero_points ? 3u : 10u) || nbytes != 4u * count || count == 0) return OI_ERR_MODEL_MISMATCH;
    *data = q + 48u + (zero_points ? 4u * scales : 0u);
    return OI_OK;
}

oi_status oi_oinf_require(const oi_oinf *f, const char *name, uint32_t dtype, uint64_t nbytes, const void **data) {
    size_t n = strlen(name);
    int part = -1;                       /* -1: a tensor, 0: its scales, 1: its zero points */
    const char *hash = strrchr(name, '#');
    if (hash) {
        if (strcmp(hash, "#scale") == 0) part = 0;
        else if (strcmp(hash, "#zero_point") == 0) part = 1;
        else return OI_ERR_MODEL_MISMATCH;
        n = (size_t)(hash - name);
    }
    uint64_t pos = f->off_tensors;
    oi_oinf_tensor t;
    for (uint32_t i = 0; i < f->n_tensors; ++i) {
        if (read_entry(f, &pos, &t) != OI_OK) return OI_ERR_MODEL_FORMAT;
        if (t.name_len != n || memcmp(t.name, name, n) != 0) continue;
        if (part >= 0) return quant_part(&t, part, dtype, nbytes, data);
        if (t.dtype != dtype || t.nbytes != nbytes || !t.data) return OI_ERR_MODEL_MISMATCH;
        *data = t.data;
        return OI_OK;
    }
    return OI_ERR_MODEL_MISMATCH;
}

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

/* ----------------------------------------------------------------------------------- CPU features */

#if defined(__x86_64__)
/* Baseline x86-64 code whatever -m flags the program is compiled with: these run before the
 * check has passed. */
#define OI_BASELINE __attribute__((target("arch=x86-64")))

OI_BASELINE static void oi_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

OI_BASELINE static uint64_t oi_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Every x86 feature of OI_CPU_FEATURE_TABLE (a row with a cpuid leaf) whose cpuid bit is set and
 * whose register state the OS saves: the OS must enable XSAVE (OSXSAVE, leaf 1 ecx bit 27) and
 * save the SSE+AVX state (XCR0 bits 1-2) before any VEX-encoded instruction may run; AVX-512 also
 * needs the opmask and ZMM state (bits 5-7). */
OI_BASELINE static uint32_t oi_cpu_detect(void) {
    uint32_t r[4], leaf1[4], leaf7[4] = {0, 0, 0, 0}, leaf7_1[4] = {0, 0, 0, 0}, out = 0;
    oi_cpuid(0, 0, r);
    uint32_t max_leaf = r[0];
    oi_cpuid(1, 0, leaf1);
    if (max_leaf >= 7) {
        oi_cpuid(7, 0, leaf7);
        if (leaf7[0] >= 1) oi_cpuid(7, 1, leaf7_1);
    }
    const uint64_t xcr0 = (leaf1[2] & (1u << 27)) ? oi_xcr0() : 0;
#define OI_DETECT(bit, name, family, leaf, sub, reg, cpuid_bit, state, auxv, auxv_bit)                \
    {                                                                                                 \
        const uint32_t *regs = (leaf) == 1 ? leaf1 : (sub) == 0 ? leaf7 : leaf7_1;                     \
        if ((leaf) != 0 && (regs[reg] & (1u << (cpuid_bit)))                                          \
            && (xcr0 & (uint64_t)(state)) == (uint64_t)(state))                                       \
            out |= (bit);                                                                             \
    }
    OI_CPU_FEATURE_TABLE(OI_DETECT)
#undef OI_DETECT
    return out;
}

OI_BASELINE static int oi_cpu_is_amd(void) {
    uint32_t r[4];
    oi_cpuid(0, 0, r);
    return r[1] == 0x68747541u && r[3] == 0x69746e65u && r[2] == 0x444d4163u;   /* "AuthenticAMD" */
}
#elif defined(__aarch64__) && defined(__linux__)
/* Baseline Armv8-A code whatever -march the program is compiled with (as on x86-64 above), where
 * the compiler takes the attribute (GCC; Clang before 16 knows no `arch=` for AArch64). Without it
 * the check is still safe: it is integer and string code, which the Armv8.2-A extensions a
 * descriptor lists (dot product, f16 arithmetic) give a compiler no instruction for. */
#if defined(__clang__)
#define OI_BASELINE
#else
#define OI_BASELINE __attribute__((target("arch=armv8-a")))
#endif

/* Every AArch64 feature of OI_CPU_FEATURE_TABLE (a row with an auxiliary-vector word) whose HWCAP
 * bit Linux sets: the kernel reports a feature only when it lets user space use it. */
OI_BASELINE static uint32_t oi_cpu_detect(void) {
    const unsigned long words[3] = {0, getauxval(AT_HWCAP), getauxval(AT_HWCAP2)};
    uint32_t out = 0;
#define OI_DETECT(bit, name, family, leaf, sub, reg, cpuid_bit, state, auxv, auxv_bit) \
    if ((auxv) != 0 && ((words[auxv] >> (auxv_bit)) & 1u)) out |= (bit);
    OI_CPU_FEATURE_TABLE(OI_DETECT)
#undef OI_DETECT
    return out;
}

static int oi_cpu_is_amd(void) { return 0; }
#else
#define OI_BASELINE
static uint32_t oi_cpu_detect(void) { return 0; }
static int oi_cpu_is_amd(void) { return 0; }
#endif

/* The features of the families up to and including `cap` (OI_CPU_FAMILIES order); an unknown
 * cap counts as the narrowest family, the safe side. */
OI_BASELINE static uint32_t oi_cpu_cap_mask(const char *cap) {
    static const char *const families[] = {
#define OI_FAMILY(name) name,
        OI_CPU_FAMILIES(OI_FAMILY)
#undef OI_FAMILY
    };
    const size_t count = sizeof families / sizeof families[0];
    size_t last = 0;
    for (size_t i = 0; i < count; i++)
        if (strcmp(cap, families[i]) == 0) last = i;
    uint32_t mask = 0;
    for (size_t i = 0; i <= last; i++) {
#define OI_IN_FAMILY(bit, name, family, leaf, sub, reg, cpuid_bit, state, auxv, auxv_bit) \
        if (strcmp(family, families[i]) == 0) mask |= (bit);
        OI_CPU_FEATURE_TABLE(OI_IN_FAMILY)
#undef OI_IN_FAMILY
    }
    return mask;
}

OI_BASELINE uint32_t oi_cpu_features(void) {
    uint32_t features = oi_cpu_detect();
    const char *cap = getenv("OI_HOST_ISA");
    if (!cap || !*cap) return features;
    return features & oi_cpu_cap_mask(cap);
}

OI_BASELINE int oi_cpu_stream_prefetch(void) {
    /* -1 until decided; a race decides twice, the same way (cpuid in a VM may trap: once) */
    static atomic_int decided = -1;
    int on = atomic_load_explicit(&decided, memory_order_relaxed);
    if (on >= 0) return on;
    const char *env = getenv("OI_STREAM_PREFETCH");
    if (env && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0)) on = env[0] == '1';
    else on = oi_cpu_is_amd() && (oi_cpu_features() & OI_CPU_AVX512F) != 0;
    atomic_store_explicit(&decided, on, memory_order_relaxed);
    return on;
}

OI_BASELINE oi_status oi_cpu_require(uint32_t required, char *buf, size_t cap) {
    static const struct { uint32_t bit; const char *name; } names[] = {
#define OI_NAME(bit, name, family, leaf, sub, reg, cpuid_bit, state, auxv, auxv_bit) {bit, name},
        OI_CPU_FEATURE_TABLE(OI_NAME)
#undef OI_NAME
    };
    uint32_t missing = required & ~oi_cpu_features();
    if (buf && cap) {
        size_t used = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (!(missing & names[i].bit)) continue;
            for (const char *c = used ? " " : ""; *c && used + 1 < cap; c++) buf[used++] = *c;
            for (const char *c = names[i].name; *c && used + 1 < cap; c++) buf[used++] = *c;
            buf[used] = '\0';
        }
    }
    return missing ? OI_ERR_UNSUPPORTED_CPU : OI_OK;
}
