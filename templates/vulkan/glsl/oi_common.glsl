// oi_common.glsl — helpers every OpenInfer compute shader includes (copied verbatim into the
// generated project's shaders/ directory; the shader defines OI_FP64 / OI_INT64 first when the
// device has shaderFloat64 / shaderInt64).
//
// Why this exists: the NumPy reference is the specification, so results must not depend on the
// driver's conversions or transcendental functions.
//   * f16 / bf16 / f8 are stored as raw bits and converted here, bit for bit as oi_numeric.h
//     (round to nearest even, NaN kept NaN) -- no reliance on OpFConvert's rounding mode.
//   * NaN / inf tests use the bit patterns: drivers may apply "fast" algebraic rules to
//     floating-point arithmetic (Mesa folds x * 0.0 and x - x to 0, for instance).
//   * exp / log / tanh / erf are fdlibm/musl ports (float and double; the trigonometric and
//     hyperbolic functions are oi_trig.glsl's, included at the end), accurate to
//     about 1 ulp: GLSL's builtins allow errors of 2^-21 absolute (log near 1) or use formulas
//     that cancel (tanh near 0), and GLSL has no double transcendental functions at all.
// Arithmetic that must not be reassociated or contracted is `precise`.

#ifndef OI_COMMON_GLSL
#define OI_COMMON_GLSL

// ------------------------------------------------------------------------------- float bits
bool oi_isnan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
bool oi_isinf(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0x7f800000u; }
bool oi_isfinite(float x) { return (floatBitsToUint(x) & 0x7f800000u) != 0x7f800000u; }
bool oi_signbit(float x) { return (floatBitsToUint(x) >> 31) != 0u; }
// r with the sign of x. A rounding (floor, ceil, trunc, round) has its input's sign, and a zero
// result must keep it (trunc(-0.5) = -0.0): some drivers' trunc loses it (Mesa's llvmpipe on AVX2-only CPUs, f64).
float oi_sign_of(float r, float x) {
    return uintBitsToFloat((floatBitsToUint(r) & 0x7fffffffu) | (floatBitsToUint(x) & 0x80000000u));
}
#define OI_INF uintBitsToFloat(0x7f800000u)
#define OI_NAN uintBitsToFloat(0x7fc00000u)

// IEEE 754-2019 maximum / minimum: NaN propagates, -0.0 < +0.0 (the reference's ieee_max/min).
float oi_maxf(float a, float b) {
    if (oi_isnan(a) || oi_isnan(b)) return a + b;
    if (a == b) return oi_signbit(a) ? b : a;
    return a > b ? a : b;
}
float oi_minf(float a, float b) {
    if (oi_isnan(a) || oi_isnan(b)) return a + b;
    if (a == b) return oi_signbit(a) ? a : b;
    return a < b ? a : b;
}

// 2^e for -126 <= e <= 127 (exact).
float oi_pow2f(int e) { return uintBitsToFloat(uint(e + 127) << 23); }
// y * 2^k without ldexp's undefined overflow / subnormal behaviour: two exact power-of-two
// factors, rounded once at the end.
float oi_scalbnf(float y, int k) {
    int a = clamp(k / 2, -126, 127);
    int b = clamp(k - a, -126, 127);
    return y * oi_pow2f(a) * oi_pow2f(b);
}

// ------------------------------------------------------------------------------- narrow floats
uint oi_rne_shift(uint m, uint shift) {
    if (shift >= 32u) return 0u;
    uint r = m >> shift, rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    return r + ((rem > half_ || (rem == half_ && (r & 1u) != 0u)) ? 1u : 0u);
}

float oi_f16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (mant << 13) | (mant != 0u ? 0x400000u : 0u));
    if (e == 0u) {
        if (mant == 0u) return uintBitsToFloat(sign);
        float v = float(mant) * (1.0 / 16777216.0);   // subnormal: mant * 2^-24, exact
        return sign != 0u ? -v : v;
    }
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (mant << 13));
}

uint oi_f32_to_f16(float f) {
    uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {                         // NaN: keep the top payload bits, stay NaN
        uint r = 0x7c00u | ((a >> 13) & 0x3ffu);
        return sign | (r == 0x7c00u ? 0x7e00u : r);
    }
    if (a >= 0x477ff000u) return sign | 0x7c00u;   // >= 65520 rounds to inf
    if (a >= 0x38800000u) {                        // normal: drop 13 mantissa bits, RNE
        uint r = a + 0xfffu + ((a >> 13) & 1u);
        return sign | ((r - 0x38000000u) >> 13);
    }
    if (a < 0x33000000u) return sign;              // below half the smallest subnormal
    uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    return sign | oi_rne_shift(m, 126u - e);       // subnormal count of 2^-24 units
}

float oi_bf16_to_f32(uint b) { return uintBitsToFloat(b << 16); }

uint oi_f32_to_bf16(float f) {
    uint x = floatBitsToUint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x0040u;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// f8 is E5M2: the upper byte of an f16. NaN decodes quiet (as the reference's f8_decode).
float oi_f8_to_f32(uint b) {
    uint h = b << 8;
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x0300u) != 0u) h |= 0x0200u;
    return oi_f16_to_f32(h);
}

uint oi_f32_to_f8(float f) {
    uint x = floatBitsToUint(f), sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7du;
    uint code;
    if (a >= 0x38800000u) {                        // |x| >= 2^-14: keep 2 mantissa bits, RNE, carry
        code = ((a + 0xfffffu + ((a >> 21) & 1u)) >> 21) - (112u << 2);
    } else if (a < 0x37000000u) {                  // below half the smallest subnormal (2^-17)
        code = 0u;
    } else {                                       // subnormal count of 2^-16 units
        uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        code = oi_rne_shift(m, 134u - e);
    }
    if (code > 0x7cu) code = 0x7cu;                // past 57344: infinity
    return sign | code;
}

// ------------------------------------------------------------------------------- packed integers
// Element k of a byte of `bits`-wide values (k < 8 / bits): raw bits, signed, unsigned.
uint oi_raw(uint byte_, uint k, uint bits) { return (byte_ >> (k * bits)) & ((1u << bits) - 1u); }
int oi_unpack_s(uint byte_, uint k, uint bits) { return bitfieldExtract(int(byte_), int(k * bits), int(bits)); }
uint oi_unpack_u(uint byte_, uint k, uint bits) { return oi_raw(byte_, k, bits); }

// ------------------------------------------------------------------------------- integers
// v wrapped (two's complement) to a `bits`-wide type and widened back: store + load.
int oi_wrap_s(int v, uint bits) { return bitfieldExtract(v, 0, int(bits)); }
uint oi_wrap_u(uint v, uint bits) { return bitfieldExtract(v, 0, int(bits)); }

// Float (already integral, or NaN / inf) -> a signed / unsigned `bits`-wide range, saturating
// (NaN -> 0), as `cast` with saturate=true; bits <= 32. Exact: the limits are powers of two.
int oi_f2s_sat(float r, uint bits) {
    float lim = oi_pow2f(int(bits) - 1);
    if (oi_isnan(r)) return 0;
    if (r >= lim) return int((1u << (bits - 1u)) - 1u);
    if (r < -lim) return -int((1u << (bits - 1u)) - 1u) - 1;
    return int(r);
}
uint oi_f2u_sat(float r, uint bits) {
    if (oi_isnan(r) || r <= 0.0) return 0u;
    if (r >= oi_pow2f(int(bits))) return bits == 32u ? 0xffffffffu : (1u << bits) - 1u;
    return uint(r);
}
// r modulo 2^32 (two's complement wrap; NaN / inf give 0), exact for integral floats.
uint oi_f2bits_wrap(float r) {
    if (!oi_isfinite(r)) return 0u;
    float a = abs(r);
    uint mag;
    if (a < 4294967296.0) {
        mag = uint(a);
    } else {
        // a = m * 2^s with s >= 9 (a 24-bit mantissa): shift the mantissa modulo 2^32
        uint bits_ = floatBitsToUint(a);
        int s = int(bits_ >> 23) - 150;
        uint m = (bits_ & 0x7fffffu) | 0x800000u;
        mag = s >= 32 ? 0u : m << uint(s);
    }
    return r < 0.0 ? 0u - mag : mag;
}

// ------------------------------------------------------------------------------- float math
// expf (fdlibm e_expf.c): |error| < 1 ulp.
float oi_expf(float x) {
    uint hx = floatBitsToUint(x);
    bool neg = (hx >> 31) != 0u;
    hx &= 0x7fffffffu;
    if (hx > 0x7f800000u) return x;                      // NaN
    if (hx >= 0x42aeac50u) {                             // |x| >= 87.33655
        if (!neg && hx >= 0x42b17218u) return OI_INF;    // x >= 88.722839: overflow
        if (neg && hx >= 0x42cff1b5u) return 0.0;        // x <= -103.972084: underflow
    }
    precise float hi, lo;
    int k;
    if (hx > 0x3eb17218u) {                              // |x| > 0.5 ln2
        if (hx > 0x3f851592u) k = int(1.4426950216e+0 * x + (neg ? -0.5 : 0.5));
        else k = neg ? -1 : 1;
        float kf = float(k);
        hi = x - kf * uintBitsToFloat(0x3f317200u);      // k * ln2hi is exact
        lo = kf * uintBitsToFloat(0x35bfbe8eu);
        x = hi - lo;
    } else if (hx > 0x39000000u) {                       // |x| > 2^-14
        k = 0;
        hi = x;
        lo = 0.0;
    } else {
        return 1.0 + x;
    }
    precise float xx = x * x;
    precise float c = x - xx * (1.6666625440e-1 + xx * -2.7667332906e-3);
    precise float y = 1.0 + (x * c / (2.0 - c) - lo + hi);
    return k == 0 ? y : oi_scalbnf(y, k);
}

// expm1f (fdlibm s_expm1f.c): exp(x) - 1 without cancellation near 0.
float oi_expm1f(float x) {
    uint u = floatBitsToUint(x);
    uint hx = u & 0x7fffffffu;
    bool neg = (u >> 31) != 0u;
    const float ln2_hi = 6.9313812256e-01, ln2_lo = 9.0580006145e-06;
    if (hx >= 0x4195b844u) {                             // |x| >= 27 ln2
        if (hx > 0x7f800000u) return x;
        if (neg) return -1.0;
        if (x > 8.8721679688e+01) return OI_INF;
    }
    precise float hi, lo, c = 0.0;
    int k;
    if (hx > 0x3eb17218u) {                              // |x| > 0.5 ln2
        if (hx < 0x3f851592u) {                          // and |x| < 1.5 ln2
            if (!neg) { hi = x - ln2_hi; lo = ln2_lo; k = 1; }
            else { hi = x + ln2_hi; lo = -ln2_lo; k = -1; }
        } else {
            k = int(1.4426950216e+00 * x + (neg ? -0.5 : 0.5));
            float t = float(k);
            hi = x - t * ln2_hi;
            lo = t * ln2_lo;
        }
        x = hi - lo;
        c = (hi - x) - lo;
    } else if (hx < 0x33000000u) {                       // |x| < 2^-25
        return x;
    } else {
        k = 0;
    }
    precise float hfx = 0.5 * x;
    precise float hxs = x * hfx;
    precise float r1 = 1.0 + hxs * (-3.3333212137e-2 + hxs * 1.5807170421e-3);
    precise float t = 3.0 - r1 * hfx;
    precise float e = hxs * ((r1 - t) / (6.0 - x * t));
    if (k == 0) return x - (x * e - hxs);
    e = x * (e - c) - c;
    e -= hxs;
    if (k == -1) return 0.5 * (x - e) - 0.5;
    if (k == 1) {
        if (x < -0.25) return -2.0 * (e - (x + 0.5));
        return 1.0 + 2.0 * (x - e);
    }
    precise float y;
    if (k < 0 || k > 56) {
        y = x - e + 1.0;
        y = oi_scalbnf(y, k);
        return y - 1.0;
    }
    float twomk = oi_pow2f(-k);
    if (k < 23) y = (x - e + (1.0 - twomk));
    else y = (x - (e + twomk) + 1.0);
    return oi_scalbnf(y, k);
}

// logf (fdlibm e_logf.c)
float oi_logf(float x) {
    uint ix = floatBitsToUint(x);
    int k = 0;
    if (ix < 0x00800000u || (ix >> 31) != 0u) {         // x < 2^-126 or negative
        if ((ix << 1) == 0u) return -OI_INF;             // log(+-0) = -inf
        if ((ix >> 31) != 0u) return oi_isnan(x) ? x : OI_NAN;
        // subnormal: normalise the mantissa with integer ops (a float multiply by 2^25 would
        // see a zero on devices that flush subnormal operands, while the bits above did not)
        int s = 23 - findMSB(ix);
        k -= 126 + s;
        ix = 0x3f800000u | ((ix << uint(s)) & 0x007fffffu);   // the same mantissa in [1, 2)
    } else if (ix >= 0x7f800000u) {
        return x;
    } else if (ix == 0x3f800000u) {
        return 0.0;
    }
    ix += 0x3f800000u - 0x3f3504f3u;                    // reduce x into [sqrt(2)/2, sqrt(2)]
    k += int(ix >> 23) - 0x7f;
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    x = uintBitsToFloat(ix);
    precise float f = x - 1.0;
    precise float s = f / (2.0 + f);
    precise float z = s * s;
    precise float w = z * z;
    precise float t1 = w * (0.40000972152 + w * 0.24279078841);
    precise float t2 = z * (0.66666662693 + w * 0.28498786688);
    precise float R = t2 + t1;
    precise float hfsq = 0.5 * f * f;
    float dk = float(k);
    precise float r = s * (hfsq + R) + dk * 9.0580006145e-06 - hfsq + f + dk * 6.9313812256e-01;
    return r;
}

// log1p(x) = log(u) * (x / (u - 1)), u = 1 + x rounded: the quotient corrects u's rounding
// (Goldberg), within a few ulp; x where u rounds to 1 (softplus's log1p(e^-|x|) for large |x|).
float oi_log1pf(float x) {
    precise float u = 1.0 + x;
    if (u == 1.0 || oi_isinf(u)) return u == 1.0 ? x : u;
    precise float d = u - 1.0;
    return oi_logf(u) * (x / d);
}

// pow, as C99 Annex F and NumPy: the special cases first, then exp(y * log|x|), negated for an
// odd integer power of a negative x
float oi_powf(float x, float y) {
    if (y == 0.0 || x == 1.0) return 1.0;
    if (oi_isnan(x) || oi_isnan(y)) return x + y;
    if (y == 1.0) return x;                             // exp(log(x)) would overflow near the largest x
    float ax = abs(x);
    if (oi_isinf(y)) {
        if (ax == 1.0) return 1.0;
        return ((ax < 1.0) == (y > 0.0)) ? 0.0 : OI_INF;
    }
    bool y_int = floor(y) == y;
    bool y_odd = y_int && abs(y) < 16777216.0 && mod(y, 2.0) == 1.0;
    bool negate = y_odd && oi_signbit(x);
    if (ax == 0.0 || oi_isinf(ax)) {
        float r = ((ax == 0.0) == (y < 0.0)) ? OI_INF : 0.0;
        return negate ? -r : r;
    }
    if (x < 0.0 && !y_int) return OI_NAN;
    float r = oi_expf(y * oi_logf(ax));
    return negate ? -r : r;
}

// tanhf (musl): via expm1f, no cancellation near 0; tanh(-0.0) = -0.0.
float oi_tanhf(float x) {
    uint u = floatBitsToUint(x);
    bool neg = (u >> 31) != 0u;
    uint w = u & 0x7fffffffu;
    if (w > 0x7f800000u) return x;
    float a = uintBitsToFloat(w);
    precise float t;
    if (w > 0x3f0c9f54u) {                               // |x| > log(3)/2
        if (w > 0x41200000u) t = 1.0;                    // |x| > 10
        else { t = oi_expm1f(2.0 * a); t = 1.0 - 2.0 / (t + 2.0); }
    } else if (w > 0x3e82c578u) {                        // |x| > log(5/3)/2
        t = oi_expm1f(2.0 * a);
        t = t / (t + 2.0);
    } else if (w >= 0x00800000u) {
        t = oi_expm1f(-2.0 * a);
        t = -t / (t + 2.0);
    } else {
        t = a;
    }
    return neg ? -t : t;
}

// erff (fdlibm s_erff.c)
float oi_erfc1f(float x) {
    precise float s = abs(x) - 1.0;
    precise float P = -2.3621185683e-03 + s * (4.1485610604e-01 + s * (-3.7220788002e-01 + s * (3.1834661961e-01 +
        s * (-1.1089469492e-01 + s * (3.5478305072e-02 + s * -2.1663755178e-03)))));
    precise float Q = 1.0 + s * (1.0642088205e-01 + s * (5.4039794207e-01 + s * (7.1828655899e-02 + s * (
        1.2617121637e-01 + s * (1.3637083583e-02 + s * 1.1984500103e-02)))));
    return 1.0 - 8.4506291151e-01 - P / Q;
}
float oi_erfc2f(uint ix, float x) {
    if (ix < 0x3fa00000u) return oi_erfc1f(x);           // |x| < 1.25
    x = abs(x);
    precise float s = 1.0 / (x * x);
    precise float R, S;
    if (ix < 0x4036db6du) {                              // |x| < 1/0.35
        R = -9.8649440333e-03 + s * (-6.9385856390e-01 + s * (-1.0558626175e+01 + s * (-6.2375331879e+01 + s * (
            -1.6239666748e+02 + s * (-1.8460508728e+02 + s * (-8.1287437439e+01 + s * -9.8143291473e+00))))));
        S = 1.0 + s * (1.9651271820e+01 + s * (1.3765776062e+02 + s * (4.3456588745e+02 + s * (6.4538726807e+02 +
            s * (4.2900814819e+02 + s * (1.0863500214e+02 + s * (6.5702495575e+00 + s * -6.0424413532e-02)))))));
    } else {
        R = -9.8649431020e-03 + s * (-7.9928326607e-01 + s * (-1.7757955551e+01 + s * (-1.6063638306e+02 + s * (
            -6.3756646729e+02 + s * (-1.0250950928e+03 + s * -4.8351919556e+02)))));
        S = 1.0 + s * (3.0338060379e+01 + s * (3.2579251099e+02 + s * (1.5367296143e+03 + s * (3.1998581543e+03 +
            s * (2.5530502930e+03 + s * (4.7452853394e+02 + s * -2.2440952301e+01))))));
    }
    float z = uintBitsToFloat(floatBitsToUint(x) & 0xffffe000u);
    precise float r = oi_expf(-z * z - 0.5625) * oi_expf((z - x) * (z + x) + R / S) / x;
    return r;
}
float oi_erff(float x) {
    uint ix = floatBitsToUint(x);
    bool neg = (ix >> 31) != 0u;
    ix &= 0x7fffffffu;
    if (ix > 0x7f800000u) return x;
    if (ix == 0x7f800000u) return neg ? -1.0 : 1.0;
    if (ix < 0x3f580000u) {                              // |x| < 0.84375
        if (ix < 0x31800000u) return 0.125 * (8.0 * x + 1.0270333290e+00 * x);
        precise float z = x * x;
        precise float r = 1.2837916613e-01 + z * (-3.2504209876e-01 + z * (-2.8481749818e-02 + z * (
            -5.7702702470e-03 + z * -2.3763017452e-05)));
        precise float s = 1.0 + z * (3.9791721106e-01 + z * (6.5022252500e-02 + z * (5.0813062117e-03 + z * (
            1.3249473704e-04 + z * -3.9602282413e-06))));
        precise float y = x + x * (r / s);
        return y;
    }
    float y = ix < 0x40c00000u ? 1.0 - oi_erfc2f(ix, x) : 1.0;
    return neg ? -y : y;
}

// ------------------------------------------------------------------------------- doubles
#ifdef OI_FP64
bool oi_isnan_d(double x) {
    uvec2 w = unpackDouble2x32(x);
    return (w.y & 0x7fffffffu) > 0x7ff00000u || ((w.y & 0x7fffffffu) == 0x7ff00000u && w.x != 0u);
}
bool oi_isinf_d(double x) { uvec2 w = unpackDouble2x32(x); return (w.y & 0x7fffffffu) == 0x7ff00000u && w.x == 0u; }
bool oi_isfinite_d(double x) { return (unpackDouble2x32(x).y & 0x7ff00000u) != 0x7ff00000u; }
bool oi_signbit_d(double x) { return (unpackDouble2x32(x).y >> 31) != 0u; }
double oi_sign_of_d(double r, double x) {
    uvec2 w = unpackDouble2x32(r);
    return packDouble2x32(uvec2(w.x, (w.y & 0x7fffffffu) | (unpackDouble2x32(x).y & 0x80000000u)));
}
// f64 roundings from the bits, exact on any driver: llvmpipe on AVX2-only CPUs returns
// trunc(x) = x for 4503599627370495.5 (2^52 - 0.5) and +0.0 for trunc(-0.5).
double oi_trunc_d(double x) {
    uvec2 w = unpackDouble2x32(x);
    int e = int((w.y >> 20) & 0x7ffu) - 1023;
    if (e >= 52) return x;                                               // integral, inf or NaN
    if (e < 0) return packDouble2x32(uvec2(0u, w.y & 0x80000000u));     // |x| < 1: zero of x's sign
    int drop = 52 - e;                                                   // fraction bits, 1..52
    if (drop >= 32) return packDouble2x32(uvec2(0u, w.y & ~((1u << uint(drop - 32)) - 1u)));
    return packDouble2x32(uvec2(w.x & ~((1u << uint(drop)) - 1u), w.y));
}
double oi_floor_d(double x) { double t = oi_trunc_d(x); return x < t ? t - 1.0LF : t; }
double oi_ceil_d(double x) { double t = oi_trunc_d(x); return x > t ? t + 1.0LF : t; }
double oi_round_even_d(double x) {
    double t = oi_trunc_d(x);
    double f = abs(x - t);                                               // exact: t and x share the exponent range
    bool odd = t - 2.0LF * oi_trunc_d(t * 0.5LF) != 0.0LF;
    return (f > 0.5LF || (f == 0.5LF && odd)) ? t + sign(x) : t;
}
#define OI_INF_D packDouble2x32(uvec2(0u, 0x7ff00000u))
#define OI_NAN_D packDouble2x32(uvec2(0u, 0x7ff80000u))

double oi_max_d(double a, double b) {
    if (oi_isnan_d(a) || oi_isnan_d(b)) return a + b;
    if (a == b) return oi_signbit_d(a) ? b : a;
    return a > b ? a : b;
}
double oi_min_d(double a, double b) {
    if (oi_isnan_d(a) || oi_isnan_d(b)) return a + b;
    if (a == b) return oi_signbit_d(a) ? a : b;
    return a < b ? a : b;
}

// 2^e for -1022 <= e <= 1023 (exact), and y * 2^k rounded once.
double oi_pow2d(int e) { return packDouble2x32(uvec2(0u, uint(e + 1023) << 20)); }
double oi_scalbn_d(double y, int k) {
    int a = clamp(k / 2, -1022, 1023);
    int b = clamp(k - a, -1022, 1023);
    return y * oi_pow2d(a) * oi_pow2d(b);
}

// f64 -> f32 rounded to nearest even, whatever rounding OpFConvert uses: the nearest of the
// conversion's result and its two neighbours, compared exactly in double (ties: even mantissa).
float oi_d2f(double d) {
    if (oi_isnan_d(d)) return OI_NAN;
    bool neg = oi_signbit_d(d);
    double a = abs(d);
    if (a >= 3.4028235677973366e38LF) return neg ? -OI_INF : OI_INF;   // >= FLT_MAX + half an ulp
    uint b = floatBitsToUint(float(a));
    if (b >= 0x7f800000u) b = 0x7f7fffffu;
    uint best = b;
    double err = abs(double(uintBitsToFloat(b)) - a);
    for (int k = 0; k < 2; ++k) {
        uint c = k == 0 ? b - 1u : b + 1u;
        if ((k == 0 && b == 0u) || c >= 0x7f800000u) continue;
        double e = abs(double(uintBitsToFloat(c)) - a);
        if (e < err || (e == err && (c & 1u) == 0u)) { best = c; err = e; }
    }
    float r = uintBitsToFloat(best);
    return neg ? -r : r;
}

// d rounded to f32 *to odd* (truncate, then set the last bit if inexact): a second rounding to
// f16 / bf16 / f8 is then the correctly rounded f64 -> narrow conversion (oi_numeric.h).
float oi_d2f_odd(double d) {
    if (oi_isnan_d(d)) return float(d);
    float f = oi_d2f(d);
    uint b = floatBitsToUint(f);
    double back = double(f);
    if (d >= 0.0LF ? back > d : back < d) b -= 1u;
    if (double(uintBitsToFloat(b)) != d) b |= 1u;
    return uintBitsToFloat(b);
}
uint oi_f64_to_f16(double d) { return oi_f32_to_f16(oi_d2f_odd(d)); }
uint oi_f64_to_bf16(double d) { return oi_f32_to_bf16(oi_d2f_odd(d)); }
uint oi_f64_to_f8(double d) { return oi_f32_to_f8(oi_d2f_odd(d)); }

// exp (fdlibm e_exp.c)
double oi_exp_d(double x) {
    uint hx = unpackDouble2x32(x).y;
    bool neg = (hx >> 31) != 0u;
    hx &= 0x7fffffffu;
    if (oi_isnan_d(x)) return x;
    if (hx >= 0x4086232bu) {                             // |x| >= 708.39
        if (x > 709.782712893383973096LF) return OI_INF_D;
        if (x < -745.13321910194110842LF) return 0.0LF;
    }
    precise double hi, lo;
    int k;
    if (hx > 0x3fd62e42u) {                              // |x| > 0.5 ln2
        if (hx >= 0x3ff0a2b2u) k = int(1.44269504088896338700LF * x + (neg ? -0.5LF : 0.5LF));
        else k = neg ? -1 : 1;
        double kd = double(k);
        hi = x - kd * 6.93147180369123816490e-01LF;
        lo = kd * 1.90821492927058770002e-10LF;
        x = hi - lo;
    } else if (hx > 0x3e300000u) {
        k = 0;
        hi = x;
        lo = 0.0LF;
    } else {
        return 1.0LF + x;
    }
    precise double xx = x * x;
    precise double c = x - xx * (1.66666666666666019037e-01LF + xx * (-2.77777777770155933842e-03LF +
        xx * (6.61375632143793436117e-05LF + xx * (-1.65339022054652515390e-06LF + xx * 4.13813679705723846039e-08LF))));
    precise double y = 1.0LF + (x * c / (2.0LF - c) - lo + hi);
    return k == 0 ? y : oi_scalbn_d(y, k);
}

// expm1 (fdlibm s_expm1.c)
double oi_expm1_d(double x) {
    uint u = unpackDouble2x32(x).y;
    uint hx = u & 0x7fffffffu;
    bool neg = (u >> 31) != 0u;
    const double ln2_hi = 6.93147180369123816490e-01LF, ln2_lo = 1.90821492927058770002e-10LF;
    if (hx >= 0x4043687au) {                             // |x| >= 56 ln2
        if (oi_isnan_d(x)) return x;
        if (neg) return -1.0LF;
        if (x > 7.09782712893383973096e+02LF) return OI_INF_D;
    }
    precise double hi, lo, c = 0.0LF;
    int k;
    if (hx > 0x3fd62e42u) {
        if (hx < 0x3ff0a2b2u) {
            if (!neg) { hi = x - ln2_hi; lo = ln2_lo; k = 1; }
            else { hi = x + ln2_hi; lo = -ln2_lo; k = -1; }
        } else {
            k = int(1.44269504088896338700LF * x + (neg ? -0.5LF : 0.5LF));
            double t = double(k);
            hi = x - t * ln2_hi;
            lo = t * ln2_lo;
        }
        x = hi - lo;
        c = (hi - x) - lo;
    } else if (hx < 0x3c900000u) {
        return x;
    } else {
        k = 0;
    }
    precise double hfx = 0.5LF * x;
    precise double hxs = x * hfx;
    precise double r1 = 1.0LF + hxs * (-3.33333333333331316428e-02LF + hxs * (1.58730158725481460165e-03LF +
        hxs * (-7.93650757867487942473e-05LF + hxs * (4.00821782732936239552e-06LF + hxs * -2.01099218183624371326e-07LF))));
    precise double t = 3.0LF - r1 * hfx;
    precise double e = hxs * ((r1 - t) / (6.0LF - x * t));
    if (k == 0) return x - (x * e - hxs);
    e = x * (e - c) - c;
    e -= hxs;
    if (k == -1) return 0.5LF * (x - e) - 0.5LF;
    if (k == 1) {
        if (x < -0.25LF) return -2.0LF * (e - (x + 0.5LF));
        return 1.0LF + 2.0LF * (x - e);
    }
    precise double y;
    if (k < 0 || k > 56) {
        y = x - e + 1.0LF;
        y = oi_scalbn_d(y, k);
        return y - 1.0LF;
    }
    double twomk = oi_pow2d(-k);
    if (k < 20) y = (x - e + (1.0LF - twomk));
    else y = (x - (e + twomk) + 1.0LF);
    return oi_scalbn_d(y, k);
}

// log (fdlibm e_log.c)
double oi_log_d(double x) {
    uvec2 w = unpackDouble2x32(x);
    uint hx = w.y;
    int k = 0;
    if (hx < 0x00100000u || (hx >> 31) != 0u) {
        if (((hx << 1) | w.x) == 0u) return -OI_INF_D;
        if ((hx >> 31) != 0u) return oi_isnan_d(x) ? x : OI_NAN_D;
        k -= 54;
        x *= 18014398509481984.0LF;                      // 2^54
        w = unpackDouble2x32(x);
        hx = w.y;
    } else if (hx >= 0x7ff00000u) {
        return x;
    } else if (hx == 0x3ff00000u && w.x == 0u) {
        return 0.0LF;
    }
    hx += 0x3ff00000u - 0x3fe6a09eu;
    k += int(hx >> 20) - 0x3ff;
    hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
    x = packDouble2x32(uvec2(w.x, hx));
    precise double f = x - 1.0LF;
    precise double hfsq = 0.5LF * f * f;
    precise double s = f / (2.0LF + f);
    precise double z = s * s;
    precise double ww = z * z;
    precise double t1 = ww * (3.999999999940941908e-01LF + ww * (2.222219843214978396e-01LF + ww * 1.531383769920937332e-01LF));
    precise double t2 = z * (6.666666666666735130e-01LF + ww * (2.857142874366239149e-01LF + ww * (
        1.818357216161805012e-01LF + ww * 1.479819860511658591e-01LF)));
    precise double R = t2 + t1;
    double dk = double(k);
    precise double r = s * (hfsq + R) + dk * 1.90821492927058770002e-10LF - hfsq + f + dk * 6.93147180369123816490e-01LF;
    return r;
}

// log1p, as oi_log1pf
double oi_log1p_d(double x) {
    precise double u = 1.0LF + x;
    if (u == 1.0LF || oi_isinf_d(u)) return u == 1.0LF ? x : u;
    precise double d = u - 1.0LF;
    return oi_log_d(u) * (x / d);
}

// pow, as C99 Annex F and NumPy: the special cases first, then exp(y * log|x|), negated for an
// odd integer power of a negative x
double oi_pow_d(double x, double y) {
    if (y == 0.0LF || x == 1.0LF) return 1.0LF;
    if (oi_isnan_d(x) || oi_isnan_d(y)) return x + y;
    if (y == 1.0LF) return x;                           // exp(log(x)) would overflow near the largest x
    double ax = abs(x);
    if (oi_isinf_d(y)) {
        if (ax == 1.0LF) return 1.0LF;
        return ((ax < 1.0LF) == (y > 0.0LF)) ? 0.0LF : OI_INF_D;
    }
    bool y_int = floor(y) == y;
    bool y_odd = y_int && abs(y) < 9007199254740992.0LF && mod(y, 2.0LF) == 1.0LF;
    bool negate = y_odd && oi_signbit_d(x);
    if (ax == 0.0LF || oi_isinf_d(ax)) {
        double r = ((ax == 0.0LF) == (y < 0.0LF)) ? OI_INF_D : 0.0LF;
        return negate ? -r : r;
    }
    if (x < 0.0LF && !y_int) return OI_NAN_D;
    double r = oi_exp_d(y * oi_log_d(ax));
    return negate ? -r : r;
}

// tanh (musl)
double oi_tanh_d(double x) {
    uvec2 w2 = unpackDouble2x32(x);
    bool neg = (w2.y >> 31) != 0u;
    if (oi_isnan_d(x)) return x;
    uint w = w2.y & 0x7fffffffu;
    double a = packDouble2x32(uvec2(w2.x, w));
    precise double t;
    if (w > 0x3fe193eau) {
        if (w > 0x40340000u) t = 1.0LF;
        else { t = oi_expm1_d(2.0LF * a); t = 1.0LF - 2.0LF / (t + 2.0LF); }
    } else if (w > 0x3fd058aeu) {
        t = oi_expm1_d(2.0LF * a);
        t = t / (t + 2.0LF);
    } else if (w >= 0x00100000u) {
        t = oi_expm1_d(-2.0LF * a);
        t = -t / (t + 2.0LF);
    } else {
        t = a;
    }
    return neg ? -t : t;
}

// erf (fdlibm s_erf.c)
double oi_erfc1_d(double x) {
    precise double s = abs(x) - 1.0LF;
    precise double P = -2.36211856075265944077e-03LF + s * (4.14856118683748331666e-01LF + s * (
        -3.72207876035701323847e-01LF + s * (3.18346619901161753674e-01LF + s * (-1.10894694282396677476e-01LF +
        s * (3.54783043256182359371e-02LF + s * -2.16637559486879084300e-03LF)))));
    precise double Q = 1.0LF + s * (1.06420880400844228286e-01LF + s * (5.40397917702171048937e-01LF + s * (
        7.18286544141962662868e-02LF + s * (1.26171219808761642112e-01LF + s * (1.36370839120290507362e-02LF +
        s * 1.19844998467991074170e-02LF)))));
    return 1.0LF - 8.45062911510467529297e-01LF - P / Q;
}
double oi_erfc2_d(uint ix, double x) {
    if (ix < 0x3ff40000u) return oi_erfc1_d(x);
    x = abs(x);
    precise double s = 1.0LF / (x * x);
    precise double R, S;
    if (ix < 0x4006db6du) {
        R = -9.86494403484714822705e-03LF + s * (-6.93858572707181764372e-01LF + s * (-1.05586262253232909814e+01LF +
            s * (-6.23753324503260060396e+01LF + s * (-1.62396669462573470355e+02LF + s * (
            -1.84605092906711035994e+02LF + s * (-8.12874355063065934246e+01LF + s * -9.81432934416914548592e+00LF))))));
        S = 1.0LF + s * (1.96512716674392571292e+01LF + s * (1.37657754143519042600e+02LF + s * (
            4.34565877475229228821e+02LF + s * (6.45387271733267880336e+02LF + s * (4.29008140027567833386e+02LF +
            s * (1.08635005541779435134e+02LF + s * (6.57024977031928170135e+00LF + s * -6.04244152148580987438e-02LF)))))));
    } else {
        R = -9.86494292470009928597e-03LF + s * (-7.99283237680523006574e-01LF + s * (-1.77579549177547519889e+01LF +
            s * (-1.60636384855821916062e+02LF + s * (-6.37566443368389627722e+02LF + s * (
            -1.02509513161107724954e+03LF + s * -4.83519191608651397019e+02LF)))));
        S = 1.0LF + s * (3.03380607434824582924e+01LF + s * (3.25792512996573918826e+02LF + s * (
            1.53672958608443695994e+03LF + s * (3.19985821950859553908e+03LF + s * (2.55305040643316442583e+03LF +
            s * (4.74528541206955367215e+02LF + s * -2.24409524465858183362e+01LF))))));
    }
    double z = packDouble2x32(uvec2(0u, unpackDouble2x32(x).y));
    precise double r = oi_exp_d(-z * z - 0.5625LF) * oi_exp_d((z - x) * (z + x) + R / S) / x;
    return r;
}
double oi_erf_d(double x) {
    uint ix = unpackDouble2x32(x).y;
    bool neg = (ix >> 31) != 0u;
    ix &= 0x7fffffffu;
    if (oi_isnan_d(x)) return x;
    if (ix >= 0x7ff00000u) return neg ? -1.0LF : 1.0LF;
    if (ix < 0x3feb0000u) {
        if (ix < 0x3e300000u) return 0.125LF * (8.0LF * x + 1.02703333676410069053e+00LF * x);
        precise double z = x * x;
        precise double r = 1.28379167095512558561e-01LF + z * (-3.25042107247001499370e-01LF + z * (
            -2.84817495755985104766e-02LF + z * (-5.77027029648944159157e-03LF + z * -2.37630166566501626084e-05LF)));
        precise double s = 1.0LF + z * (3.97917223959155352819e-01LF + z * (6.50222499887672944485e-02LF + z * (
            5.08130628187576562776e-03LF + z * (1.32494738004321644526e-04LF + z * -3.96022827877536812320e-06LF))));
        precise double y = x + x * (r / s);
        return y;
    }
    double y = ix < 0x40180000u ? 1.0LF - oi_erfc2_d(ix, x) : 1.0LF;
    return neg ? -y : y;
}

// f64 -> integers (cast): saturating, or wrapping modulo 2^32 / 2^64; r is integral, NaN or inf.
int oi_d2s_sat(double r, uint bits) {
    double lim = oi_pow2d(int(bits) - 1);
    if (oi_isnan_d(r)) return 0;
    if (r >= lim) return int((1u << (bits - 1u)) - 1u);
    if (r < -lim) return -int((1u << (bits - 1u)) - 1u) - 1;
    return int(r);
}
uint oi_d2u_sat(double r, uint bits) {
    if (oi_isnan_d(r) || r <= 0.0LF) return 0u;
    if (r >= oi_pow2d(int(bits))) return bits == 32u ? 0xffffffffu : (1u << bits) - 1u;
    return uint(r);
}
uint oi_d2bits_wrap(double r) {
    if (!oi_isfinite_d(r)) return 0u;
    double m = r - 4294967296.0LF * floor(r * (1.0LF / 4294967296.0LF));   // exact: in [0, 2^32)
    return uint(m);
}
#endif  // OI_FP64

#ifdef OI_INT64
// int -> int64_t sign extension spelled out: Mesa 22.3 miscompiles comparisons of int64_t(int)
// values with constants (`int64_t(x) < 0` is always false there).
int64_t oi_sext64(int v) { return packInt2x32(ivec2(v, v >> 31)); }
int64_t oi_wrap_s64(int64_t v, uint bits) {
    return bits >= 64u ? v : (v << (64u - bits)) >> (64u - bits);
}
uint64_t oi_wrap_u64(uint64_t v, uint bits) {
    return bits >= 64u ? v : v & ((uint64_t(1) << bits) - uint64_t(1));
}
uint oi_popcount64(uint64_t v) { uvec2 w = unpackUint2x32(v); return uint(bitCount(w.x) + bitCount(w.y)); }
// f32 (integral, NaN or inf) -> 64-bit integers: saturating, or wrapping modulo 2^64.
int64_t oi_f2s64_sat(float r, uint bits) {
    if (oi_isnan(r)) return int64_t(0);
    if (r >= 9223372036854775808.0) return int64_t(0x7fffffffffffffffl);
    if (r < -9223372036854775808.0) return int64_t(-9223372036854775807l) - int64_t(1);
    return int64_t(r);
}
uint64_t oi_f2u64_sat(float r, uint bits) {
    if (oi_isnan(r) || r <= 0.0) return uint64_t(0);
    if (r >= 18446744073709551616.0) return ~uint64_t(0);
    return uint64_t(r);
}
uint64_t oi_f2bits64_wrap(float r) {
    if (!oi_isfinite(r)) return uint64_t(0);
    float a = abs(r);
    uint64_t mag;
    if (a < 9223372036854775808.0) {
        mag = uint64_t(a);
    } else {                                             // m * 2^s, s >= 40: shift modulo 2^64
        uint b = floatBitsToUint(a);
        int sh = int(b >> 23) - 150;
        mag = sh >= 64 ? uint64_t(0) : uint64_t((b & 0x7fffffu) | 0x800000u) << uint(sh);
    }
    return r < 0.0 ? uint64_t(0) - mag : mag;
}
#ifdef OI_FP64
int64_t oi_d2s64_sat(double r, uint bits) {
    double lim = oi_pow2d(int(bits) - 1);
    if (oi_isnan_d(r)) return int64_t(0);
    if (r >= lim) return int64_t((uint64_t(1) << (bits - 1u)) - uint64_t(1));
    if (r < -lim) return -int64_t((uint64_t(1) << (bits - 1u)) - uint64_t(1)) - int64_t(1);
    return int64_t(r);
}
uint64_t oi_d2u64_sat(double r, uint bits) {
    if (oi_isnan_d(r) || r <= 0.0LF) return uint64_t(0);
    double lim = bits >= 64u ? 18446744073709551616.0LF : oi_pow2d(int(bits));
    if (r >= lim) return bits >= 64u ? ~uint64_t(0) : (uint64_t(1) << bits) - uint64_t(1);
    return uint64_t(r);
}
// r modulo 2^64 (NaN / inf give 0), exact for every integral double: |r| mod 2^64 is a
// multiple of |r|'s ulp below 2^64 (exact in double), then negated modulo 2^64.
uint64_t oi_d2bits64_wrap(double r) {
    if (!oi_isfinite_d(r)) return uint64_t(0);
    double a = abs(r);
    double m = a - 18446744073709551616.0LF * floor(a * (1.0LF / 18446744073709551616.0LF));
    uint64_t mag = m >= 9223372036854775808.0LF ? uint64_t(m - 9223372036854775808.0LF) + (uint64_t(1) << 63)
                                                : uint64_t(m);
    return r < 0.0LF ? uint64_t(0) - mag : mag;
}
#endif
#endif  // OI_INT64

#include "oi_trig.glsl"

#endif  // OI_COMMON_GLSL
