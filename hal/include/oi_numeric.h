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

#endif /* OI_NUMERIC_H */
