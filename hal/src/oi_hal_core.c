/*
 * oi_hal_core.c — what every CPU HAL shares, with no operating system under it: status strings,
 * the bounds-checked .oinf reader over memory, and the CPU feature check. It needs only memcpy,
 * memset and memcmp of the C library, so a bare-metal program (oi_hal_baremetal.c) links it as a
 * Linux one (oi_hal.c) does; those files add what an OS provides (allocation, files, clock,
 * threads, the environment). It neither divides 64-bit integers nor calls the C library's
 * string functions: on a 32-bit microcontroller each is hundreds of bytes of flash (a 64-bit
 * division 700 B, newlib's strcmp 732 B) for what a few lines here do.
 * See oi_hal.h for the contract of each function.
 */
#include "oi_hal.h"

#include <stdatomic.h>
#include <string.h>
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


/* ------------------------------------------------------------------------------------------ messages */

/* Appends c to buf if there is room for it and the NUL (out counts the written characters). */
static void put_char(char *buf, size_t cap, size_t *out, char c) {
    if (*out + 1 < cap) buf[(*out)++] = c;
}

/* v in base 10 or 16, without a division (see the top of the file): hexadecimal digits by shifts,
 * a decimal digit by counting subtractions of its power of ten (at most 9). */
static void put_unsigned(char *buf, size_t cap, size_t *out, unsigned long long v, unsigned base) {
    if (base == 16) {
        int shift = 60;
        while (shift > 0 && (v >> shift) == 0) shift -= 4;
        for (; shift >= 0; shift -= 4) put_char(buf, cap, out, "0123456789abcdef"[(v >> shift) & 15u]);
        return;
    }
    static const unsigned long long pow10[20] = {
        1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
        1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
        100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
        1000000000000000000ull, 10000000000000000000ull};
    int i = 19;
    while (i > 0 && pow10[i] > v) --i;
    for (; i >= 0; --i) {
        char digit = '0';
        while (v >= pow10[i]) {
            v -= pow10[i];
            ++digit;
        }
        put_char(buf, cap, out, digit);
    }
}

void oi_vformat(char *buf, size_t cap, const char *fmt, va_list args) {
    if (!buf || cap == 0) return;
    size_t out = 0;
    for (const char *f = fmt; *f; ++f) {
        if (*f != '%') {
            put_char(buf, cap, &out, *f);
            continue;
        }
        ++f;
        if (*f == 's') {
            const char *str = va_arg(args, const char *);
            for (const char *c = str ? str : "(null)"; *c; ++c) put_char(buf, cap, &out, *c);
        } else if (*f == 'd') {
            const int v = va_arg(args, int);
            if (v < 0) put_char(buf, cap, &out, '-');
            put_unsigned(buf, cap, &out, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v, 10);
        } else if (*f == 'u') {
            put_unsigned(buf, cap, &out, va_arg(args, unsigned), 10);
        } else if (f[0] == 'z' && f[1] == 'u') {
            ++f;
            put_unsigned(buf, cap, &out, va_arg(args, size_t), 10);
        } else if (f[0] == 'l' && f[1] == 'l' && f[2] == 'u') {
            f += 2;
            put_unsigned(buf, cap, &out, va_arg(args, unsigned long long), 10);
        } else if (*f == 'p') {
            put_char(buf, cap, &out, '0');
            put_char(buf, cap, &out, 'x');
            put_unsigned(buf, cap, &out, (uintptr_t)va_arg(args, void *), 16);
        } else if (*f == '%') {
            put_char(buf, cap, &out, '%');
        } else {                        /* not one of ours: shown as written */
            put_char(buf, cap, &out, '%');
            if (!*f) break;
            put_char(buf, cap, &out, *f);
        }
    }
    buf[out] = '\0';
}

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
            /* (the builtin: no 64-bit division, see the top of the file) */
            if (__builtin_mul_overflow(nonzero, v, &nonzero) || nonzero >= OINF_MAX_NUMEL) return 0;
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
__attribute__((noinline)) static int blobs_disjoint(const oi_oinf *f, uint64_t off_metadata, uint32_t n_metadata) {
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

/* Validates the header and every table entry of f's image; where the metadata table starts and its
 * entries, for blobs_disjoint. */
__attribute__((noinline)) static oi_status parse(oi_oinf *f, uint64_t *metadata_at, uint32_t *metadata_count) {
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
        !names_distinct(f, TABLE_TENSORS, off_tensors, off_data, n_tensors))
        return OI_ERR_MODEL_FORMAT;
    *metadata_at = off_metadata;
    *metadata_count = n_metadata;
    return OI_OK;
}

oi_status oi_oinf_open_memory(const void *image, uint64_t size, oi_oinf *out) {
    /* every blob is 8-aligned in the file, so an image at an 8-aligned address keeps tensor data
     * aligned for its type: a misaligned one (a weights array placed by hand in flash) would
     * fault in the first kernel on a core without unaligned access (Cortex-M's LDRD, VLDR) */
    if (!image || !out || (uintptr_t)image % 8u) return OI_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    out->base = image;
    out->size = size;
    /* parse and blobs_disjoint are called one after the other, neither inlined, so that their
     * stack frames (entries, two blob walks) are never on the stack together: a microcontroller's
     * stack holds the deepest path of create_in (openinfer/footprint.py), and this is it */
    uint64_t metadata_at = 0;
    uint32_t metadata_count = 0;
    oi_status st = parse(out, &metadata_at, &metadata_count);
    if (st == OI_OK && !blobs_disjoint(out, metadata_at, metadata_count)) st = OI_ERR_MODEL_FORMAT;
    if (st != OI_OK) oi_oinf_close(out);
    return st;
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

/* Whether the NUL-terminated strings a and b are equal (not strcmp: see the top of the file). */
static int str_eq(const char *a, const char *b) {
    while (*a && *a == *b) ++a, ++b;
    return *a == *b;
}

oi_status oi_oinf_require(const oi_oinf *f, const char *name, uint32_t dtype, uint64_t nbytes, const void **data) {
    const char *hash = NULL;             /* the last '#' of name: what follows names a part */
    size_t n = 0;
    for (; name[n]; ++n)
        if (name[n] == '#') hash = name + n;
    int part = -1;                       /* -1: a tensor, 0: its scales, 1: its zero points */
    if (hash) {
        if (str_eq(hash, "#scale")) part = 0;
        else if (str_eq(hash, "#zero_point")) part = 1;
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
        if (str_eq(cap, families[i])) last = i;
    uint32_t mask = 0;
    for (size_t i = 0; i <= last; i++) {
#define OI_IN_FAMILY(bit, name, family, leaf, sub, reg, cpuid_bit, state, auxv, auxv_bit) \
        if (str_eq(family, families[i])) mask |= (bit);
        OI_CPU_FEATURE_TABLE(OI_IN_FAMILY)
#undef OI_IN_FAMILY
    }
    return mask;
}

OI_BASELINE uint32_t oi_cpu_features(void) {
    uint32_t features = oi_cpu_detect();
    const char *cap = oi_env("OI_HOST_ISA");
    if (!cap || !*cap) return features;
    return features & oi_cpu_cap_mask(cap);
}

OI_BASELINE int oi_cpu_stream_prefetch(void) {
    /* -1 until decided; a race decides twice, the same way (cpuid in a VM may trap: once) */
    static atomic_int decided = -1;
    int on = atomic_load_explicit(&decided, memory_order_relaxed);
    if (on >= 0) return on;
    const char *env = oi_env("OI_STREAM_PREFETCH");
    if (env && (str_eq(env, "0") || str_eq(env, "1"))) on = env[0] == '1';
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
