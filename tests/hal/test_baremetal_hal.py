"""The bare-metal HAL (hal/src/oi_hal_baremetal.c with oi_hal_core.c): what a firmware without an
OS gets. Its behaviour runs here on the host (the file is portable C): no heap (create() fails,
create_in() is the way), no files, the user's clock, one thread (ranges and tasks run inline on
the caller), and images refused when misaligned. It also compiles warning-free with no POSIX
header for a Cortex-M4 where arm-none-eabi-gcc is installed."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import openinfer as oi
from openinfer.resources import hal_dir, hal_sources

HARNESS = r"""
#include "oi_hal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t covered[2];
static void range(void *ctx, int64_t b, int64_t e) { (void)ctx; covered[0] = b; covered[1] = e; }
static int order[3], tasks;
static void task(void *arg) { order[tasks++] = *(int *)arg; }
static uint64_t ticks(void) { return 12345u; }

int main(int argc, char **argv) {
    (void)argc;
    FILE *f = fopen(argv[1], "rb");
    static uint64_t image[1 << 12];                   /* 8-aligned, as a linked weights array */
    size_t n = fread(image, 1, sizeof image, f);
    fclose(f);
    oi_oinf file;
    printf("alloc %d\n", oi_aligned_alloc(64) == NULL);
    printf("open %d\n", (int)oi_oinf_open(argv[1], &file));
    printf("memory %d\n", (int)oi_oinf_open_memory(image, n, &file));
    printf("tensors %u\n", (unsigned)file.n_tensors);
    oi_oinf_close(&file);
    /* the same image one byte on: refused, not read */
    memmove((char *)image + 1, image, n);
    printf("misaligned %d\n", (int)oi_oinf_open_memory((char *)image + 1, n, &file));
    oi_pool *pool = (oi_pool *)1;
    const oi_status created = oi_pool_create(4, &pool);
    printf("pool %d %d %d\n", (int)created, pool == NULL, oi_pool_threads(pool));
    oi_pool_parallel_for(pool, 1000, 7, range, NULL);
    printf("range %lld %lld slot %d\n", (long long)covered[0], (long long)covered[1], oi_pool_slot());
    int a = 1, b = 2, c = 3;
    oi_pool_submit(pool, task, &a);
    oi_pool_submit(pool, task, &b);
    oi_pool_submit(pool, task, &c);
    oi_pool_wait(pool);
    printf("tasks %d %d %d\n", order[0], order[1], order[2]);
    printf("clock %llu", (unsigned long long)oi_now_ns());
    oi_set_clock(ticks);
    printf(" %llu\n", (unsigned long long)oi_now_ns());
    printf("threads %d\n", oi_default_threads(8));
    return 0;
}
"""


def test_the_baremetal_hal_runs_inline_without_heap_files_or_clock(tmp_path):
    model = tmp_path / "m.oinf"
    oi.write_oinf(model, {"w": np.arange(12, dtype=np.float32), "b": np.ones(3, np.float64)})
    (tmp_path / "main.c").write_text(HARNESS)
    exe = tmp_path / "baremetal"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(hal_dir() / "include"),
                    str(tmp_path / "main.c"), *hal_sources("baremetal"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), str(model)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["alloc 1", "open 3", "memory 0", "tensors 2", "misaligned 1", "pool 0 1 1",
                   "range 0 1000 slot 0", "tasks 1 2 3", "clock 0 12345", "threads 1"]


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                    reason="arm-none-eabi-gcc is not installed (Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi)")
def test_it_compiles_for_a_cortex_m4_without_posix(tmp_path):
    for src in hal_sources("baremetal"):
        subprocess.run(["arm-none-eabi-gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-mcpu=cortex-m4",
                        "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-I", str(hal_dir() / "include"),
                        "-c", src, "-o", str(tmp_path / "x.o")], check=True)


FORMAT_HARNESS = r"""
#include "oi_hal.h"
#include <stdio.h>
#include <string.h>

static void both(size_t cap, const char *fmt, ...) {
    char ours[128], libc[128];
    va_list a, b;
    va_start(a, fmt);
    va_copy(b, a);
    oi_vformat(ours, cap, fmt, a);
    vsnprintf(libc, cap, fmt, b);
    va_end(a);
    va_end(b);
    printf("%s|%s\n", ours, libc);
}

int main(void) {
    both(128, "set: variable %d is not a dynamic input, or %zu is not its size", -17, (size_t)4096);
    both(128, "%s: in `%s`: %s", "node 3", "entry", "index 9 out of range");
    both(128, "set_size: T = %llu is outside 1..40, %u%%", 18446744073709551615ull, 0u);
    both(128, "%d %d %d", 0, 2147483647, -2147483647 - 1);
    both(12, "cut %s here", "far too long");
    both(1, "%s", "nothing fits");
    void *p = (void *)0x1234abcd;
    char expect[64];
    snprintf(expect, sizeof expect, "at 0x%llx", (unsigned long long)(uintptr_t)p);
    both(64, "at %p", p);
    printf("%s\n", expect);
    return 0;
}
"""


def test_the_hal_formats_error_messages_as_printf_does(tmp_path):
    """oi_vformat (hal/src/oi_hal_core.c), the generated programs' error formatter, against the C
    library's vsnprintf: each conversion the messages use, the extremes of int and unsigned long
    long, cuts to a small buffer, and %p as 0x and hex digits."""
    (tmp_path / "main.c").write_text(FORMAT_HARNESS)
    exe = tmp_path / "format"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-format", "-I",
                    str(hal_dir() / "include"), str(tmp_path / "main.c"), *hal_sources("baremetal"), "-o", str(exe)],
                   check=True)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    *pairs, pointer = lines
    for line in pairs[:-1]:
        ours, libc = line.split("|")
        assert ours == libc
    assert pairs[-1].split("|")[0] == pointer
