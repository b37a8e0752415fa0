// oi_trig.glsl — the trigonometric and hyperbolic functions (float and double), included at the
// end of oi_common.glsl, whose exp / expm1 and sin / cos kernels they build on. GLSL's builtins
// are float only and allow errors of 2^-11 absolute (sin, cos on [-pi, pi]; nothing outside);
// these are within a few ulp on every finite argument, |x| up to the largest float included.
// The constants come from tools/glsl_trig_constants.py.

// 2/pi's bits (OI_TWO_OVER_PI[2] holds its first 32 fraction bits) after two zero words, which
// stand for the (zero) integer bits a reduction of a smaller argument reads.
const uint OI_TWO_OVER_PI[42] = uint[](
    0x00000000u, 0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u,
    0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu, 0xfe1deb1cu, 0xb129a73eu,
    0xe88235f5u, 0x2ebb4484u, 0xe99c7026u, 0xb45f7e41u, 0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu,
    0x1ff897ffu, 0xde05980fu, 0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u, 0x9e5fea2du,
    0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u, 0x1f8d5d08u, 0x56033046u, 0xfc7b6babu,
    0xf0cfbc20u, 0x9af4361du
);

// 32 bits of OI_TWO_OVER_PI from bit k (bit 0: the most significant bit of word 0).
uint oi_two_over_pi_bits(int k) {
    int w = k >> 5, s = k & 31;
    uint hi = OI_TWO_OVER_PI[w];
    return s == 0 ? hi : (hi << uint(s)) | (OI_TWO_OVER_PI[w + 1] >> uint(32 - s));
}

// sinf / cosf on a reduced argument |x| <= pi/4 (Cephes minimax polynomials).
float oi_ksinf(float x) {
    precise float z = x * x;
    precise float r = x + x * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    return r;
}
float oi_kcosf(float x) {
    precise float z = x * x;
    precise float r = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 +
                                                                         z * 2.443315711809948e-5));
    return r;
}

// Payne-Hanek reduction of a finite |x| = m * 2^q (m a 24-bit integer): n and r with |x| = n * pi/2
// + r, |r| <= pi/4. Of |x| * 2/pi only its value modulo 4 matters, so only the bits of 2/pi from
// 2^(1-q) on are read: 96 of them (m * 2^q times the rest is below 2^-69, far under the closest a
// float comes to a multiple of pi/2). Their product with m, modulo 2^96, is |x| * 2/pi modulo 4
// in fixed point: 2 integer bits, 94 fraction bits.
int oi_rem_pio2f(float ax, out float r) {
    uint bits = floatBitsToUint(ax);
    uint m = (bits & 0x007fffffu) | 0x00800000u;
    int k = int(bits >> 23) - 150 + 62;                   // the bit of 2^(1-q): q + 62
    uint w0 = oi_two_over_pi_bits(k), w1 = oi_two_over_pi_bits(k + 32), w2 = oi_two_over_pi_bits(k + 64);
    uint h1, l1, h2, l2, c;
    umulExtended(m, w1, h1, l1);
    umulExtended(m, w2, h2, l2);
    uint p2 = l2;
    uint p1 = uaddCarry(h2, l1, c);
    uint p0 = m * w0 + h1 + c;                            // modulo 2^32: the multiples of 4 drop out
    int n = int(p0 >> 30);
    p0 &= 0x3fffffffu;
    bool negative = (p0 & 0x20000000u) != 0u;             // fraction >= 1/2: round n up, r < 0
    if (negative) {                                       // 2^94 - fraction, exactly
        n += 1;
        p0 = ~p0 & 0x3fffffffu; p1 = ~p1; p2 = ~p2;
        p2 = uaddCarry(p2, 1u, c);
        p1 = uaddCarry(p1, c, c);
        p0 += c;
    }
    precise float f = float(p2) * oi_pow2f(-94) + float(p1) * oi_pow2f(-62);
    f = f + float(p0) * oi_pow2f(-30);
    f = f * 1.57079632679489661923;
    r = negative ? -f : f;
    return n & 3;
}

float oi_sinf(float x) {
    if (!oi_isfinite(x)) return OI_NAN;
    float ax = abs(x), r, s;
    if (ax <= 0.785398163397448279) {
        s = oi_ksinf(ax);
    } else {
        int n = oi_rem_pio2f(ax, r);
        s = (n & 1) == 0 ? oi_ksinf(r) : oi_kcosf(r);
        if (n >= 2) s = -s;
    }
    return oi_signbit(x) ? -s : s;
}

float oi_cosf(float x) {
    if (!oi_isfinite(x)) return OI_NAN;
    float ax = abs(x), r;
    if (ax <= 0.785398163397448279) return oi_kcosf(ax);
    int n = oi_rem_pio2f(ax, r);
    float c = (n & 1) == 0 ? oi_kcosf(r) : oi_ksinf(r);
    return (n == 1 || n == 2) ? -c : c;
}

// sin / cos of the reduced argument (within a few ulp each, and the quotient rounds once more)
float oi_tanf(float x) {
    if (!oi_isfinite(x)) return OI_NAN;
    float ax = abs(x), r = ax;
    int n = ax <= 0.785398163397448279 ? 0 : oi_rem_pio2f(ax, r);
    float t = (n & 1) == 0 ? oi_ksinf(r) / oi_kcosf(r) : -oi_kcosf(r) / oi_ksinf(r);
    return oi_signbit(x) ? -t : t;
}

// atan(t) for |t| <= tan(pi/8): t + t z P(z), z = t^2 (P: tools/glsl_trig_constants.py)
float oi_atan_polyf(float t) {
    precise float z = t * t;
    precise float r = t + t * z * (-0.3333333134651184 + z * (0.1999955028295517 + z * (-0.1426423192024231 +
        z * (0.10746298730373383 + z * (-0.06459376215934753)))));
    return r;
}

// |x| > 1: pi/2 - atan(1/|x|); then |x| > tan(pi/8): pi/4 + atan((|x| - 1) / (|x| + 1)).
float oi_atanf(float x) {
    if (oi_isnan(x)) return x;
    float a = abs(x);
    bool inverted = a > 1.0;
    if (inverted) a = a >= 16777216.0 ? 0.0 : 1.0 / a;  // (past 2^24, atan(1/a) < pi/2's half ulp)
    precise float r;
    if (a > 0.414213562373095049) r = 0.785398163397448310 + oi_atan_polyf((a - 1.0) / (a + 1.0));
    else r = oi_atan_polyf(a);
    if (inverted) r = 1.57079632679489661923 - r;
    return oi_signbit(x) ? -r : r;
}

// asin x = atan(x / sqrt(1 - x^2)), 1 - x^2 as (1 - x)(1 + x): exact-ish near |x| = 1
float oi_asinf(float x) {
    if (oi_isnan(x) || abs(x) > 1.0) return OI_NAN;
    if (abs(x) == 1.0) return x * 1.57079632679489661923;
    precise float d = (1.0 - x) * (1.0 + x);
    return oi_atanf(x / sqrt(d));
}

// acos x = 2 atan(sqrt((1 - x) / (1 + x)))
float oi_acosf(float x) {
    if (oi_isnan(x) || abs(x) > 1.0) return OI_NAN;
    if (x == -1.0) return 3.14159265358979323846;
    precise float q = (1.0 - x) / (1.0 + x);
    return 2.0 * oi_atanf(sqrt(q));
}

// sinh x = (t + t / (t + 1)) / 2, t = expm1(|x|) (no cancellation); past exp's overflow
// threshold (e^|x| / 2 is still finite) as (e^(|x|/2) / 2) e^(|x|/2).
float oi_sinhf(float x) {
    float a = abs(x);
    precise float s;
    if (a < 0.000244140625) return x;                     // |x| < 2^-12: x^3 / 6 is below x's ulp
    if (a > 88.0) {
        float h = oi_expf(0.5 * a);
        s = (0.5 * h) * h;
    } else {
        float t = oi_expm1f(a);
        s = 0.5 * (t + t / (t + 1.0));
    }
    return oi_signbit(x) ? -s : s;
}

// cosh x = 1 + t^2 / (2 (1 + t)), t = expm1(|x|), for |x| < 1; (e + 1/e) / 2 up to exp's overflow
float oi_coshf(float x) {
    float a = abs(x);
    precise float c;
    if (a < 1.0) {
        float t = oi_expm1f(a);
        c = 1.0 + t * t / (2.0 * (1.0 + t));
    } else if (a > 88.0) {
        float h = oi_expf(0.5 * a);
        c = (0.5 * h) * h;
    } else {
        float e = oi_expf(a);
        c = 0.5 * (e + 1.0 / e);                          // (NaN: here)
    }
    return c;
}

#ifdef OI_FP64
// The Payne-Hanek reduction of oi_rem_pio2f for a double |x| = m * 2^q (m a 53-bit integer), for
// |x| >= 2^20 pi/2 (oi_rem_pio2_d's medium reduction below): 192 bits of 2/pi times m, modulo
// 2^192, give |x| * 2/pi modulo 4 with 190 fraction bits (a double comes no closer than 2^-62 to
// a multiple of pi/2). Returns n with |x| = n * pi/2 + r.
int oi_rem_pio2_large_d(double ax, out double r) {
    uvec2 w = unpackDouble2x32(ax);
    uint u[2] = uint[](w.x, (w.y & 0x000fffffu) | 0x00100000u);
    int k = int(w.y >> 20) - 1075 + 62;
    uint v[6];                                            // least significant first
    for (int j = 0; j < 6; ++j) v[j] = oi_two_over_pi_bits(k + 32 * (5 - j));
    uint p[6] = uint[](0u, 0u, 0u, 0u, 0u, 0u);
    for (int i = 0; i < 2; ++i) {
        uint carry = 0u;
        for (int j = 0; i + j < 6; ++j) {
            uint hi, lo, c1, c2;
            umulExtended(u[i], v[j], hi, lo);
            uint s = uaddCarry(lo, p[i + j], c1);
            p[i + j] = uaddCarry(s, carry, c2);
            carry = hi + c1 + c2;
        }
    }
    int n = int(p[5] >> 30);
    p[5] &= 0x3fffffffu;
    bool negative = (p[5] & 0x20000000u) != 0u;
    if (negative) {
        n += 1;
        uint c = 1u;
        for (int j = 0; j < 6; ++j) p[j] = uaddCarry(~p[j], c, c);
        p[5] &= 0x3fffffffu;
    }
    precise double f = 0.0LF;
    for (int j = 1; j < 6; ++j) f = f + double(p[j]) * oi_pow2d(32 * j - 190);
    f = f * 1.57079632679489661923LF;
    r = negative ? -f : f;
    return n & 3;
}

// sin / cos (fdlibm k_sin.c, k_cos.c, medium-size __rem_pio2 up to 2^20 pi/2, Payne-Hanek past it).
double oi_ksin_d(double x, double y) {
    precise double z = x * x;
    precise double w = z * z;
    precise double r = 8.33333333332248946124e-03LF + z * (-1.98412698298579493134e-04LF +
        z * 2.75573137070700676789e-06LF) +
        z * w * (-2.50507602534068634195e-08LF + z * 1.58969099521155010221e-10LF);
    precise double v = z * x;
    precise double out_ = x - ((z * (0.5LF * y - v * r) - y) - v * -1.66666666666666324348e-01LF);
    return out_;
}
double oi_kcos_d(double x, double y) {
    precise double z = x * x;
    precise double w = z * z;
    precise double r = z * (4.16666666666666019037e-02LF + z * (-1.38888888888741095749e-03LF +
        z * 2.48015872894767294178e-05LF)) +
        w * w * (-2.75573143513906633035e-07LF + z * (2.08757232129817482790e-09LF +
        z * -1.13596475577881948265e-11LF));
    precise double hz = 0.5LF * z;
    precise double ww = 1.0LF - hz;
    precise double out_ = ww + (((1.0LF - ww) - hz) + (z * r - x * y));
    return out_;
}
// x = n * pi/2 + (y0 + y1), |y0 + y1| <= pi/4; returns n.
int oi_rem_pio2_d(double x, out double y0, out double y1) {
    if (abs(x) >= 1647099.3291652855LF) {                 // 2^20 pi/2
        double r;
        int n = oi_rem_pio2_large_d(abs(x), r);
        y0 = x < 0.0LF ? -r : r;
        y1 = 0.0LF;
        return x < 0.0LF ? -n : n;
    }
    precise double fn = roundEven(x * 6.36619772367581382433e-01LF);
    precise double r = x - fn * 1.57079632673412561417e+00LF;
    precise double w = fn * 6.07710050650619224932e-11LF;
    y0 = r - w;
    int j = int((unpackDouble2x32(x).y >> 20) & 0x7ffu);
    int ey = int((unpackDouble2x32(y0).y >> 20) & 0x7ffu);
    if (j - ey > 16) {
        precise double t = r;
        w = fn * 6.07710050630396597660e-11LF;
        r = t - w;
        w = fn * 2.02226624879595063154e-21LF - ((t - r) - w);
        y0 = r - w;
        ey = int((unpackDouble2x32(y0).y >> 20) & 0x7ffu);
        if (j - ey > 49) {
            t = r;
            w = fn * 2.02226624871116645580e-21LF;
            r = t - w;
            w = fn * 8.47842766036889956997e-32LF - ((t - r) - w);
            y0 = r - w;
        }
    }
    precise double tail = (r - y0) - w;
    y1 = tail;
    return int(fn);
}
double oi_sin_d(double x) {
    if (!oi_isfinite_d(x)) return OI_NAN_D;
    if (abs(x) <= 0.785398163397448279LF) return abs(x) < 1e-300LF ? x : oi_ksin_d(x, 0.0LF);
    double y0, y1;
    int n = oi_rem_pio2_d(x, y0, y1) & 3;
    if (n == 0) return oi_ksin_d(y0, y1);
    if (n == 1) return oi_kcos_d(y0, y1);
    if (n == 2) return -oi_ksin_d(y0, y1);
    return -oi_kcos_d(y0, y1);
}
double oi_cos_d(double x) {
    if (!oi_isfinite_d(x)) return OI_NAN_D;
    if (abs(x) <= 0.785398163397448279LF) return oi_kcos_d(x, 0.0LF);
    double y0, y1;
    int n = oi_rem_pio2_d(x, y0, y1) & 3;
    if (n == 0) return oi_kcos_d(y0, y1);
    if (n == 1) return -oi_ksin_d(y0, y1);
    if (n == 2) return -oi_kcos_d(y0, y1);
    return oi_ksin_d(y0, y1);
}

double oi_tan_d(double x) {
    if (!oi_isfinite_d(x)) return OI_NAN_D;
    if (abs(x) <= 0.785398163397448279LF) return oi_ksin_d(x, 0.0LF) / oi_kcos_d(x, 0.0LF);
    double y0, y1;
    int n = oi_rem_pio2_d(x, y0, y1);
    return (n & 1) == 0 ? oi_ksin_d(y0, y1) / oi_kcos_d(y0, y1) : -oi_kcos_d(y0, y1) / oi_ksin_d(y0, y1);
}

double oi_atan_poly_d(double t) {
    precise double z = t * t;
    precise double r = t + t * z * (-0.3333333333333335LF + z * (0.199999999999974LF +
        z * (-0.14285714284890277LF + z * (0.11111111028464443LF + z * (-0.09090905007016747LF +
        z * (0.07692191470829157LF + z * (-0.06664610604280592LF + z * (0.05858892933216246LF +
        z * (-0.05088854312201108LF + z * (0.03931853521498919LF + z * (-0.0192716635996476LF)))))))))));
    return r;
}

double oi_atan_d(double x) {
    if (oi_isnan_d(x)) return x;
    double a = abs(x);
    bool inverted = a > 1.0LF;
    if (inverted) a = a >= 18014398509481984.0LF ? 0.0LF : 1.0LF / a;   // (2^54)
    precise double r;
    if (a > 0.414213562373095049LF) r = 0.785398163397448310LF + oi_atan_poly_d((a - 1.0LF) / (a + 1.0LF));
    else r = oi_atan_poly_d(a);
    if (inverted) r = 1.57079632679489661923LF - r;
    return oi_signbit_d(x) ? -r : r;
}

double oi_asin_d(double x) {
    if (oi_isnan_d(x) || abs(x) > 1.0LF) return OI_NAN_D;
    if (abs(x) == 1.0LF) return x * 1.57079632679489661923LF;
    precise double d = (1.0LF - x) * (1.0LF + x);
    return oi_atan_d(x / sqrt(d));
}

double oi_acos_d(double x) {
    if (oi_isnan_d(x) || abs(x) > 1.0LF) return OI_NAN_D;
    if (x == -1.0LF) return 3.14159265358979323846LF;
    precise double q = (1.0LF - x) / (1.0LF + x);
    return 2.0LF * oi_atan_d(sqrt(q));
}

double oi_sinh_d(double x) {
    double a = abs(x);
    precise double s;
    if (a < 3.7252902984e-09LF) return x;                // |x| < 2^-28
    if (a > 709.0LF) {
        double h = oi_exp_d(0.5LF * a);
        s = (0.5LF * h) * h;
    } else {
        double t = oi_expm1_d(a);
        s = 0.5LF * (t + t / (t + 1.0LF));
    }
    return oi_signbit_d(x) ? -s : s;
}

double oi_cosh_d(double x) {
    double a = abs(x);
    precise double c;
    if (a < 1.0LF) {
        double t = oi_expm1_d(a);
        c = 1.0LF + t * t / (2.0LF * (1.0LF + t));
    } else if (a > 709.0LF) {
        double h = oi_exp_d(0.5LF * a);
        c = (0.5LF * h) * h;
    } else {
        double e = oi_exp_d(a);
        c = 0.5LF * (e + 1.0LF / e);
    }
    return c;
}
#endif
