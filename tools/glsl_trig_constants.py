"""The constants of the GLSL trigonometric functions in templates/vulkan/glsl/oi_common.glsl,
computed from scratch: the bits of 2/pi that the Payne-Hanek argument reduction reads
(OI_TWO_OVER_PI) and the atan polynomials (oi_atan_polyf / oi_atan_poly_d).

    python tools/glsl_trig_constants.py     prints them, with each polynomial's largest error

atan(t) = t + t z P(z), z = t^2, for |t| <= tan(pi/8) (the functions reduce to that interval):
P is fitted by least squares on Chebyshev nodes of [0, tan(pi/8)^2] to the series
sum_k (-1)^k z^(k-1) / (2k + 1), summed in double far past its convergence.
"""

from __future__ import annotations

import math

import numpy as np

#: zero words ahead of 2/pi's bits (reductions of |x| >= 2^-10 read from there), and 2/pi's words
ZERO_WORDS, WORDS = 2, 40


def _atan_fixed(inv: int, bits: int) -> int:
    """atan(1/inv) * 2^bits, by its series in integers."""
    total, power, k = 0, (1 << bits) // inv, 0
    while power:
        term = power // (2 * k + 1)
        total += -term if k % 2 else term
        power //= inv * inv
        k += 1
    return total


def two_over_pi_words() -> list[int]:
    bits = 32 * WORDS + 64
    pi = 16 * _atan_fixed(5, bits) - 4 * _atan_fixed(239, bits)       # Machin, to ~2^-bits
    frac = (2 << (2 * bits)) // pi                                     # 2/pi * 2^bits
    frac >>= 64                                                        # drop the guard bits
    words = [(frac >> (32 * (WORDS - 1 - i))) & 0xFFFFFFFF for i in range(WORDS)]
    return [0] * ZERO_WORDS + words


def _series(z: np.ndarray) -> np.ndarray:
    return sum((-1.0) ** k * z ** (k - 1) / (2 * k + 1) for k in range(60, 0, -1))


def atan_poly(degree: int) -> tuple[list[float], float]:
    """P's coefficients (z^0 first) and the largest relative error of t + t z P(z) in double."""
    top = math.tan(math.pi / 8) ** 2
    nodes = top / 2 * (1 - np.cos(np.pi * (np.arange(400) + 0.5) / 400))
    cheb = np.polynomial.chebyshev.Chebyshev.fit(nodes, _series(nodes), degree, domain=[0, top])
    coef = list(cheb.convert(kind=np.polynomial.Polynomial, domain=[-1, 1], window=[-1, 1]).coef)
    z = np.linspace(0, top, 20001)[1:]
    p = np.zeros_like(z)
    for c in reversed(coef):
        p = p * z + c
    t = np.sqrt(z)
    exact = t + t * z * _series(z)
    return coef, float(np.max(np.abs(t + t * z * p - exact) / exact))


def main() -> None:
    words = two_over_pi_words()
    print(f"const uint OI_TWO_OVER_PI[{len(words)}] = uint[](")
    for i in range(0, len(words), 8):
        print("    " + ", ".join(f"0x{w:08x}u" for w in words[i:i + 8]) + ("," if i + 8 < len(words) else ""))
    print(");")
    for name, degree in (("float", 4), ("double", 10)):
        coef, err = atan_poly(degree)
        print(f"// {name}: degree {degree}, largest relative error {err:.2e} (coefficients exact)")
        print(", ".join(repr(float(np.float32(c)) if name == "float" else float(c)) for c in coef))


if __name__ == "__main__":
    main()
