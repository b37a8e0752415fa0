/*
 * main.c — loads the mlp_regression model, feeds four deterministic input batches, steps, and
 * prints the first row of each output. Everything it calls is the generated C ABI
 * (mlp_regression.h) on OpenInfer's HAL.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mlp_regression.h"

static int check(oi_status st, const oi_mlp_regression *m, const char *what) {
    if (st == OI_OK) return 0;
    fprintf(stderr, "%s failed: %s %s\n", what, oi_status_str(st), m ? oi_mlp_regression_error(m) : "");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.oinf\n", argv[0]);
        return 2;
    }
    oi_mlp_regression *m = NULL;
    if (check(oi_mlp_regression_create(argv[1], &m), NULL, "create")) return 1;
    float x[4 * 16], y[4 * 8];
    for (int step = 0; step < 4; ++step) {
        for (int i = 0; i < 4 * 16; ++i) x[i] = (float)((i * 37 + step * 11) % 23 - 11) / 11.0f;
        if (check(oi_mlp_regression_set(m, OI_MLP_REGRESSION_VAR_x, x, sizeof x), m, "set") ||
            check(oi_mlp_regression_step(m), m, "step") ||
            check(oi_mlp_regression_get(m, OI_MLP_REGRESSION_VAR_y, y, sizeof y), m, "get")) {
            oi_mlp_regression_destroy(m);
            return 1;
        }
        printf("step %d y[0] =", step);
        for (int j = 0; j < 8; ++j) printf(" %.6f", y[j]);
        printf("\n");
    }
    oi_mlp_regression_destroy(m);
    return 0;
}
