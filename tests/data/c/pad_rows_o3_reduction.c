/* GCC 12.2 (Debian 12) at -O3 -mavx2 miscompiles this nested row copy: the padded copy a 3x3
 * convolution with padding 1 made of a 14x14 input (OpenInfer's conv_tiled `_pad` until the
 * padding became memset / memcpy). Exit status 0: right; 1: miscompiled. No UB: UBSan-clean.
 * tests/synth/test_compiler_matrix.py builds it with each toolchain of the matrix. */
#include <stdint.h>
#include <stdio.h>

static void pad(float *restrict xp, const float *restrict in0, int64_t nb, int64_t row_lo, int64_t row_hi) {
    for (int64_t p = nb * 8; p < (nb + 1) * 8; ++p) {
        for (int64_t r = row_lo; r <= row_hi; ++r) {
            float *restrict d = xp + p * 256 + r * 16;
            const int64_t ih = r - 1;
            if (ih < 0 || ih >= 14) {
                for (int64_t q = 0; q < 16; ++q) d[q] = 0;
                continue;
            }
            const float *restrict s = in0 + p * 196 + ih * 14;
            for (int64_t q = 0; q < 1; ++q) d[q] = 0;
            for (int64_t q = 1; q < 15; ++q) d[q] = s[q - 1];
            for (int64_t q = 15; q < 16; ++q) d[q] = 0;
        }
    }
}

int main(void) {
    static float in[8 * 196], xp[8 * 256];
    for (int i = 0; i < 8 * 196; ++i) in[i] = (float)(i + 1);
    pad(xp, in, 0, 0, 15);
    int bad = 0;
    for (int p = 0; p < 8; ++p)
        for (int r = 0; r < 16; ++r)
            for (int q = 0; q < 16; ++q) {
                float want = (r >= 1 && r <= 14 && q >= 1 && q <= 14) ? in[p * 196 + (r - 1) * 14 + q - 1] : 0.0f;
                bad += xp[p * 256 + r * 16 + q] != want;
            }
    printf("%d of %d padded elements wrong\n", bad, 8 * 256);
    return bad != 0;
}
