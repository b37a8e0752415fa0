/*
 * main.c — a firmware that runs the mlp_regression model on a Cortex-M: the program's memory is
 * three static buffers (no heap), its weights the .oinf `openinfer gen --embed-weights` linked into
 * flash; it feeds four deterministic input batches, steps, and prints the first row of each output
 * (the same rows as examples/meson-consumer/main.c on a PC). The printing goes to the host through
 * Arm semihosting (newlib's rdimon), which QEMU serves; a board would print to its UART instead.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mlp_regression.h"

/* the regions create_in() takes: sizes from the generated header, 64-aligned */
static _Alignas(64) uint8_t context[OI_MLP_REGRESSION_CONTEXT_BYTES];
static _Alignas(64) uint8_t arena[OI_MLP_REGRESSION_ARENA_BYTES + 1];
static _Alignas(64) uint8_t persistent[OI_MLP_REGRESSION_PERSISTENT_BYTES + 1];

/* the model image in flash (mlp_regression_weights.S, section .rodata.oi_weights) */
extern const uint8_t oi_mlp_regression_embedded_oinf[];
extern const uint64_t oi_mlp_regression_embedded_oinf_size;

void initialise_monitor_handles(void);      /* newlib rdimon: stdio through semihosting */

static int check(oi_status st, const oi_mlp_regression *m, const char *what) {
    if (st == OI_OK) return 0;
    printf("%s failed: %s %s\n", what, oi_status_str(st), m ? oi_mlp_regression_error(m) : "");
    return 1;
}

int main(void) {
    initialise_monitor_handles();
    oi_mlp_regression *m = NULL;
    if (check(oi_mlp_regression_create_in(context, arena, persistent, oi_mlp_regression_embedded_oinf,
                                          (size_t)oi_mlp_regression_embedded_oinf_size, &m), NULL, "create_in"))
        return 1;
    static float x[4 * 16], y[4 * 8];
    for (int step = 0; step < 4; ++step) {
        for (int i = 0; i < 4 * 16; ++i) x[i] = (float)((i * 37 + step * 11) % 23 - 11) / 11.0f;
        if (check(oi_mlp_regression_set(m, OI_MLP_REGRESSION_VAR_x, x, sizeof x), m, "set") ||
            check(oi_mlp_regression_step(m), m, "step") ||
            check(oi_mlp_regression_get(m, OI_MLP_REGRESSION_VAR_y, y, sizeof y), m, "get"))
            return 1;
        printf("step %d y[0] =", step);
        for (int j = 0; j < 8; ++j) printf(" %.6f", (double)y[j]);
        printf("\n");
    }
    return 0;
}
