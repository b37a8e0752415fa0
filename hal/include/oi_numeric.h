/*
 * oi_numeric.h — element conversions shared by every generated C kernel.
 *
 * The rounding here is bit-for-bit the rounding of the NumPy reference (openinfer/numerics.py),
 * so narrow types compare exactly: f32 -> f16 / bf16 / f8 (E5M2) round to nearest, ties to even,
 * overflow to infinity; NaN stays NaN (f8 writes 0x7D). Packed integers (i4 i2 i1 u4 u2 u1 t2 t1)
 * live `8 / bits` to a byte, element k at bit (k % (8 / bits)) * bits, two's complement within
 * their width; t1 stores bit 0 for -1 and bit 1 for +1.
 *
 * Everything is `static inline` and free of libm so any translation unit may include it.
 */
#ifndef OI_NUMERIC_H
#define OI_NUMERIC_H

#include <stdint.h>
#include <string.h>

#define OI_NUMERIC_VERSION 1

static inline uint32_t oi_f32_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
static inline float oi_bits_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }

/* Round m * 2^-shift to the nearest integer, ties to even (shift >= 1). */
static inline uint32_t oi_rne_shift(uint32_t m, uint32_t shift) {
    if (shift >= 32) return 0;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    return r + (rem > half || (rem == half && (r & 1u)));
}

/* ---------------------------------------------------------------------------------------- f16 */
static inline float oi_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1fu) return oi_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0) return oi_bits_f32(sign);
        /* subnormal: mant * 2^-24, exact in f32 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return oi_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t oi_f32_to_f16(float f) {
    uint32_t x = oi_f32_bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {                         /* NaN: keep the top payload bits, stay NaN */
        uint32_t r = 0x7c00u | ((a >> 13) & 0x3ffu);
        return (uint16_t)(sign | (r == 0x7c00u ? 0x7e00u : r));
    }
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a >= 0x38800000u) {                        /* normal: drop 13 mantissa bits, RNE */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (a < 0x33000000u) return (uint16_t)sign;    /* below half the smallest subnormal */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    return (uint16_t)(sign | oi_rne_shift(m, 126u - e)); /* subnormal count of 2^-24 units */
}

/* --------------------------------------------------------------------------------------- bf16 */
static inline float oi_bf16_to_f32(uint16_t b) { return oi_bits_f32((uint32_t)b << 16); }

static inline uint16_t oi_f32_to_bf16(float f) {
    uint32_t x = oi_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ----------------------------------------------------------------------------------------- f8 */
#define OI_F8_NAN 0x7du

static inline float oi_f8_to_f32(uint8_t b) { return oi_f16_to_f32((uint16_t)((uint16_t)b << 8)); }

static inline uint8_t oi_f32_to_f8(float f) {
    uint32_t x = oi_f32_bits(f), sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return OI_F8_NAN;
    uint32_t code;
    if (a >= 0x38800000u) {                        /* |x| >= 2^-14: keep 2 mantissa bits, RNE, carry */
        code = ((a + 0xfffffu + ((a >> 21) & 1u)) >> 21) - (112u << 2);
    } else if (a < 0x37000000u) {                  /* below half the smallest subnormal (2^-17) */
        code = 0;
    } else {                                       /* subnormal count of 2^-16 units */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        code = oi_rne_shift(m, 134u - e);
    }
    if (code > 0x7cu) code = 0x7cu;                /* past 57344: infinity */
    return (uint8_t)(sign | code);
}

/* ------------------------------------------------------------------------------------- packed */
/* Element k of a packed array of `bits`-wide values (bits in 1, 2, 4), as raw unsigned bits. */
static inline uint32_t oi_packed_raw(const uint8_t *p, int64_t k, unsigned bits) {
    unsigned per = 8u / bits;
    return (p[k / per] >> ((unsigned)(k % per) * bits)) & ((1u << bits) - 1u);
}

static inline void oi_packed_store_raw(uint8_t *p, int64_t k, unsigned bits, uint32_t raw) {
    unsigned per = 8u / bits, shift = (unsigned)(k % per) * bits;
    uint8_t mask = (uint8_t)(((1u << bits) - 1u) << shift);
    p[k / per] = (uint8_t)((p[k / per] & ~mask) | ((raw << shift) & mask));
}

/* Signed (two's complement within `bits`) and unsigned element reads and writes. */
static inline int32_t oi_packed_get_s(const uint8_t *p, int64_t k, unsigned bits) {
    uint32_t raw = oi_packed_raw(p, k, bits);
    return (raw & (1u << (bits - 1u))) ? (int32_t)raw - (int32_t)(1u << bits) : (int32_t)raw;
}
static inline uint32_t oi_packed_get_u(const uint8_t *p, int64_t k, unsigned bits) {
    return oi_packed_raw(p, k, bits);
}
/* Stores the low `bits` of v: wrap-around is the two's complement truncation. */
static inline void oi_packed_set(uint8_t *p, int64_t k, unsigned bits, int64_t v) {
    oi_packed_store_raw(p, k, bits, (uint32_t)((uint64_t)v & ((1u << bits) - 1u)));
}
/* t1: bit 1 is +1, bit 0 is -1. t2: two's complement in 2 bits, clamped to -1..1 on store. */
static inline int32_t oi_t1_get(const uint8_t *p, int64_t k) { return oi_packed_raw(p, k, 1) ? 1 : -1; }
static inline void oi_t1_set(uint8_t *p, int64_t k, int64_t v) { oi_packed_store_raw(p, k, 1, v > 0 ? 1u : 0u); }
static inline void oi_t2_set(uint8_t *p, int64_t k, int64_t v) {
    oi_packed_set(p, k, 2, v > 1 ? 1 : (v < -1 ? -1 : v));
}

/* Bytes of `n` elements of `bits`-wide packed storage. */
static inline int64_t oi_packed_bytes(int64_t n, unsigned bits) { return (n * (int64_t)bits + 7) / 8; }

/* ==========================================================================================
 * Helpers of the portable C kernels (openinfer/targets/c/kernels). Same rules as above: static
 * inline, no libm, bit-exact with the NumPy reference kernels (openinfer/reference/kernels).
 * ======================================================================================== */

/* ---------------------------------------------------------------------- f64 -> narrow floats */
/* d rounded to f32 *to odd* (truncate, then set the last bit if anything was dropped), as
 * numerics._f32_for_narrowing: a second rounding of the result to f16/bf16/f8 (<= 11 bits) is
 * then the correctly rounded f64 -> narrow conversion (no double-rounding error). Overflow
 * gives FLT_MAX (odd), which the narrow conversions take to infinity; NaN stays NaN. */
static inline float oi_f64_to_f32_odd(double d) {
    float f = (float)d;
    if (d != d) return f;
    uint32_t b = oi_f32_bits(f);
    double back = (double)f;
    if (d >= 0 ? back > d : back < d) b -= 1u;     /* rounded away from zero: step back (inf too) */
    if ((double)oi_bits_f32(b) != d) b |= 1u;      /* inexact: sticky last bit */
    return oi_bits_f32(b);
}

/* f64 -> f16 / bf16 / f8 rounded once, to nearest even (NumPy's f64 -> f16 cast; the
 * reference's bf16_bits / f8_bits of f64 values). */
static inline uint16_t oi_f64_to_f16(double d) { return oi_f32_to_f16(oi_f64_to_f32_odd(d)); }
static inline uint16_t oi_f64_to_bf16(double d) { return oi_f32_to_bf16(oi_f64_to_f32_odd(d)); }
static inline uint8_t oi_f64_to_f8(double d) { return oi_f32_to_f8(oi_f64_to_f32_odd(d)); }

/* f with a NaN made quiet (the quiet bit set). oi_f8_to_f32 of an f8 NaN (0x7D -> f16 0x7D00) is a
 * signalling NaN; where such a value is stored without arithmetic (a cast to f32/f64) this keeps
 * the result what the reference's f8_decode gives (NumPy warns on signalling NaNs). */
static inline float oi_quiet_f32(float f) {
    uint32_t x = oi_f32_bits(f);
    return (x & 0x7fffffffu) > 0x7f800000u ? oi_bits_f32(x | 0x00400000u) : f;
}

/* ------------------------------------------------------------------------ IEEE minimum/maximum */
/* IEEE 754-2019 maximum / minimum: NaN propagates, -0.0 < +0.0 (the reference's ieee_max/min). */
static inline float oi_maxf(float a, float b) {
    if (a != a || b != b) return a + b;
    if (a == b) return (oi_f32_bits(a) >> 31) ? b : a;
    return a > b ? a : b;
}
static inline float oi_minf(float a, float b) {
    if (a != a || b != b) return a + b;
    if (a == b) return (oi_f32_bits(a) >> 31) ? a : b;
    return a < b ? a : b;
}
static inline int oi_signbit_f64(double d) { uint64_t x; memcpy(&x, &d, 8); return (int)(x >> 63); }
static inline double oi_max_f64(double a, double b) {
    if (a != a || b != b) return a + b;
    if (a == b) return oi_signbit_f64(a) ? b : a;
    return a > b ? a : b;
}
static inline double oi_min_f64(double a, double b) {
    if (a != a || b != b) return a + b;
    if (a == b) return oi_signbit_f64(a) ? a : b;
    return a < b ? a : b;
}

/* ------------------------------------------------------------------------- integer arithmetic */
/* v wrapped (two's complement) into a signed / unsigned `bits`-wide range (1..64), widened back
 * to 64 bits: what storing into that type and loading again gives. */
static inline int64_t oi_wrap_s(int64_t v, unsigned bits) {
    if (bits >= 64u) return v;
    uint64_t mask = ((uint64_t)1 << bits) - 1u, u = (uint64_t)v & mask;
    return (u >> (bits - 1u)) ? (int64_t)(u | ~mask) : (int64_t)u;
}
static inline uint64_t oi_wrap_u(uint64_t v, unsigned bits) {
    return bits >= 64u ? v : v & (((uint64_t)1 << bits) - 1u);
}

/* Truncating signed division and remainder, b != 0; INT64_MIN / -1 wraps to INT64_MIN and
 * INT64_MIN % -1 is 0 (no overflow trap). */
static inline int64_t oi_div_s64(int64_t a, int64_t b) {
    return b == -1 ? (int64_t)(0u - (uint64_t)a) : a / b;
}
static inline int64_t oi_rem_s64(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
/* Floor division (NumPy //), b != 0, wrapping like oi_div_s64. */
static inline int64_t oi_floordiv_s64(int64_t a, int64_t b) {
    if (b == -1) return (int64_t)(0u - (uint64_t)a);
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

/* Set bits of x. */
static inline unsigned oi_popcount64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_popcountll(x);
#else
    unsigned n = 0;
    while (x) { x &= x - 1u; ++n; }
    return n;
#endif
}

/* ------------------------------------------------------------------------ float -> integer */
/* r is an integral value (already rounded), ±inf or NaN. Saturating conversions into a signed /
 * unsigned `bits`-wide range (NaN -> 0, ±inf -> the range's ends), as `cast` with saturate. */
static inline int64_t oi_f64_to_sint_sat(double r, unsigned bits) {
    uint64_t half = (uint64_t)1 << (bits - 1u);
    double lim = (double)half;                       /* 2^(bits-1), exact */
    if (r != r) return 0;
    if (r >= lim) return (int64_t)(half - 1u);
    if (r < -lim) return -(int64_t)(half - 1u) - 1;
    return (int64_t)r;
}
static inline uint64_t oi_f64_to_uint_sat(double r, unsigned bits) {
    double lim = bits >= 64u ? 18446744073709551616.0 : (double)((uint64_t)1 << bits);
    if (r != r || r <= 0) return 0;
    if (r >= lim) return bits >= 64u ? UINT64_MAX : ((uint64_t)1 << bits) - 1u;
    return (uint64_t)r;
}
/* r modulo 2^64 (two's complement wrap; ±inf and NaN give 0), exact for every integral double:
 * `cast` with saturate=false. The store into the target type then wraps to its width. */
static inline uint64_t oi_f64_to_bits_wrap(double r) {
    uint64_t b, mag;
    memcpy(&b, &r, 8);
    unsigned e = (unsigned)((b >> 52) & 0x7ffu);
    if (e == 0x7ffu) return 0;
    if (e < 1075u) {                                 /* |r| < 2^52: converts exactly */
        mag = (uint64_t)(r < 0 ? -r : r);
    } else {                                         /* mantissa * 2^(e - 1075), modulo 2^64 */
        unsigned sh = e - 1075u;
        mag = sh >= 64u ? 0 : ((b & 0xfffffffffffffu) | ((uint64_t)1 << 52)) << sh;
    }
    return (b >> 63) ? 0u - mag : mag;
}

/* ------------------------------------------------------------------- exact 128-bit sums */
/* Integer mean_axis: the exact sum of 64-bit values (two's complement over 128 bits), divided
 * by the count, truncated toward zero, and wrapped to 64 bits (as the reference's Python ints). */
typedef struct oi_acc128 { uint64_t lo, hi; } oi_acc128;

static inline void oi_acc128_add_s(oi_acc128 *a, int64_t v) {
    uint64_t lo = a->lo + (uint64_t)v;
    a->hi += (uint64_t)(lo < a->lo) + (v < 0 ? UINT64_MAX : 0u);
    a->lo = lo;
}
static inline void oi_acc128_add_u(oi_acc128 *a, uint64_t v) {
    uint64_t lo = a->lo + v;
    a->hi += (uint64_t)(lo < a->lo);
    a->lo = lo;
}
/* sum / n truncated toward zero, modulo 2^64; 0 < n < 2^63; `is_signed`: the sum may be negative. */
static inline uint64_t oi_acc128_mean(oi_acc128 a, uint64_t n, int is_signed) {
    int neg = is_signed && (a.hi >> 63);
    if (neg) {                                       /* |sum| */
        a.lo = ~a.lo + 1u;
        a.hi = ~a.hi + (uint64_t)(a.lo == 0);
    }
    uint64_t r = a.hi % n, q = 0;                    /* quotient bits above 64 wrap away */
    for (int i = 63; i >= 0; --i) {                  /* long division of (r : lo) by n */
        r = (r << 1) | ((a.lo >> i) & 1u);
        q <<= 1;
        if (r >= n) { r -= n; q |= 1u; }
    }
    return neg ? 0u - q : q;
}

/* Copy n packed elements (raw bits) from src[s..] to dst[d..] (layout ops on i4/u2/...). */
static inline void oi_packed_copy(uint8_t *dst, int64_t d, const uint8_t *src, int64_t s, int64_t n, unsigned bits) {
    for (int64_t k = 0; k < n; ++k) oi_packed_store_raw(dst, d + k, bits, oi_packed_raw(src, s + k, bits));
}

#endif /* OI_NUMERIC_H */
