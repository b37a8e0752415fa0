"""oi_pool_hold_awake: while a trace hook is installed, the pool's idle workers keep spinning
instead of sleeping (so a per-node profile times parallel kernels as the untraced step runs
them), and sleep again once it is removed; an oversubscribed pool (more threads than CPUs) never
spins. The observable: each worker thread's scheduler state in /proc (R: spinning, S: asleep on
the pool's condition variable), sampled well past the ~100 us spin budget."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import openinfer as oi
from openinfer.resources import hal_dir, hal_sources
from openinfer.sim import Simulator

HARNESS = r"""
#define _GNU_SOURCE
#include "oi_hal.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void nothing(void *ctx, int64_t b, int64_t e) { (void)ctx; (void)b; (void)e; }

static void pause_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* The states of the process's threads other than this one, as one letter each. */
static void states(const char *label) {
    char out[256] = {0};
    size_t n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) && n + 1 < sizeof out) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == getpid()) continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = 0;
        const char *paren = strrchr(buf, ')');      /* "pid (comm) S ..." */
        if (paren && paren[1] == ' ') out[n++] = paren[2];
    }
    if (d) closedir(d);
    printf("%s %s\n", label, out);
}

int main(int argc, char **argv) {
    oi_pool *pool;
    if (argc != 2 || oi_pool_create(atoi(argv[1]), &pool) != OI_OK) return 1;
    oi_pool_parallel_for(pool, 64, 1, nothing, NULL);      /* the workers have run once */
    for (int sample = 0; sample < 3; ++sample) {
        pause_ms(30);
        states("idle");
    }
    oi_pool_hold_awake(pool, 1);
    oi_pool_parallel_for(pool, 64, 1, nothing, NULL);      /* wakes any sleeper (joins the job) */
    for (int sample = 0; sample < 3; ++sample) {
        pause_ms(30);
        states("held");
    }
    oi_pool_hold_awake(pool, 0);
    for (int sample = 0; sample < 3; ++sample) {
        pause_ms(30);
        states("released");
    }
    oi_pool_hold_awake(NULL, 1);                            /* no pool: nothing */
    oi_pool_destroy(pool);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if not sys.platform.startswith("linux"):
        pytest.skip("reads thread states from /proc (Linux)")
    d = tmp_path_factory.mktemp("pool_hold")
    (d / "main.c").write_text(HARNESS)
    exe = d / "pool_hold"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(hal_dir() / "include"),
                    str(d / "main.c"), *hal_sources(), "-pthread", "-o", str(exe)], check=True)
    return exe


def _states(exe, threads: int) -> dict[str, list[str]]:
    out = subprocess.run([str(exe), str(threads)], capture_output=True, text=True, check=True, timeout=60).stdout
    seen: dict[str, list[str]] = {}
    for line in out.splitlines():
        label, _, letters = line.partition(" ")
        seen.setdefault(label, []).append(letters)
    return seen


def test_held_workers_spin_and_sleep_again_when_released(harness):
    cpus = os.cpu_count() or 1
    if cpus < 2:
        pytest.skip("one CPU: a pool of two threads is oversubscribed and never spins")
    seen = _states(harness, 2)                       # one worker
    assert seen["idle"] == ["S"] * 3, seen           # past the spin budget: asleep
    assert seen["held"] == ["R"] * 3, seen           # woken and kept spinning
    assert seen["released"] == ["S"] * 3, seen


def test_an_oversubscribed_pool_sleeps_even_when_held(harness):
    threads = (os.cpu_count() or 1) + 2              # more threads than CPUs: no spinning at all
    seen = _states(harness, threads)
    for label in ("idle", "held", "released"):
        assert seen[label] == ["S" * (threads - 1)] * 3, (label, seen)


def _thread_states() -> dict[int, str]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = open(f"/proc/self/task/{tid}/stat").read()
        except FileNotFoundError:
            continue
        out[int(tid)] = stat[stat.rindex(")") + 2]
    return out


def test_a_generated_program_holds_its_pool_while_traced(tmp_path, monkeypatch):
    """Through the generated library: while a step runs with an observer that takes 5 ms a node
    (fifty spin budgets), the pool's worker stays awake (R) in every callback; an untraced step
    leaves it to sleep once idle (S)."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: a pool of two threads is oversubscribed and never spins")
    rng = np.random.default_rng(0)
    oi.write_oinf(tmp_path / "m.oinf", tensors={"w": rng.standard_normal((16, 16, 3, 3), dtype=np.float32)})
    graph = ("dynamic { x: f32[1, 16, 40, 40]; }\nconstant { w: f32[16, 16, 3, 3]; }\n"
             "volatile { y: f32[1, 16, 40, 40]; z: f32[1, 16, 40, 40]; }\n"
             "block entry {\n  op conv2d(x, w, padding=1) >> y;\n  op conv2d(y, w, padding=1) >> z;\n  return;\n}\n")
    monkeypatch.setenv("OI_NUM_THREADS", "2")
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    before = set(_thread_states())
    ex = Simulator(tmp_path / "m.oinf", oi.graph(graph), arch="x86_64-generic").make_executor()
    assert "oi_pool_parallel_for" in next(ex.sim.project.glob("*_kernels.c")).read_text()   # the convs split
    x = rng.standard_normal((1, 16, 40, 40), dtype=np.float32)
    ex.insert(x=x)
    workers = set(_thread_states()) - before
    assert len(workers) == 1
    seen = []

    def slow_observer(_index):
        time.sleep(0.005)
        seen.append({_thread_states().get(t) for t in workers})

    ex.observe(slow_observer)
    list(ex.iterate())
    ex.observe(None)
    assert seen and all(s == {"R"} for s in seen), seen
    ex.insert(x=x)
    ex.run_step()                       # untraced
    time.sleep(0.03)
    assert {_thread_states().get(t) for t in workers} == {"S"}
