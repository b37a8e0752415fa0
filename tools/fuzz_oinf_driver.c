/*
 * fuzz_oinf_driver.c — the C reader's verdicts on many .oinf images in one process, for
 * tools/fuzz_oinf.py (the differential fuzz of the two readers).
 *
 * stdin: images, each as a little-endian u64 byte count followed by the bytes. stdout: one
 * character per image: 'A' (oi_oinf_open_memory accepted it), 'R' (OI_ERR_MODEL_FORMAT), 'X' (any
 * other status, or an accepted file whose entries then fail to read back). Each image is copied
 * into a buffer of exactly its size, so under AddressSanitizer a read one byte past the file is
 * reported; an accepted image has every tensor's data and quant payload read in full and every
 * tensor looked up by name (and its quant keys), so the validated offsets are exercised too.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oi_hal.h"

static volatile uint8_t sink;

static void touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint8_t x = 0;
    for (uint64_t i = 0; i < n; ++i) x ^= b[i];
    sink ^= x;
}

static char verdict(const uint8_t *image, uint64_t size) {
    oi_oinf f;
    oi_status st = oi_oinf_open_memory(image, size, &f);
    if (st == OI_ERR_MODEL_FORMAT) return 'R';
    if (st != OI_OK) return 'X';
    char name[256];
    for (uint32_t i = 0; i < f.n_tensors; ++i) {
        oi_oinf_tensor t;
        if (oi_oinf_tensor_at(&f, i, &t) != OI_OK) return 'X';
        if (t.data) touch(t.data, t.nbytes);
        if (t.quant) touch(t.quant, t.quant_nbytes);
        if (t.name_len + sizeof "#zero_point" > sizeof name) continue;
        memcpy(name, t.name, t.name_len);
        name[t.name_len] = 0;
        const void *p = NULL;
        if (t.data && oi_oinf_require(&f, name, t.dtype, t.nbytes, &p) != OI_OK) return 'X';
        if (t.quant) {
            strcpy(name + t.name_len, "#scale");
            oi_status q = oi_oinf_require(&f, name, 10, 0, &p);   /* size 0: a mismatch, never format */
            if (q != OI_ERR_MODEL_MISMATCH) return 'X';
        }
    }
    oi_oinf_close(&f);
    return 'A';
}

int main(void) {
    uint64_t size;
    while (fread(&size, 8, 1, stdin) == 1) {
        uint8_t *image = malloc(size ? size : 1);
        if (!image || fread(image, 1, size, stdin) != size) return 2;
        putchar(verdict(image, size));
        free(image);
    }
    return fflush(stdout) == 0 ? 0 : 3;
}
