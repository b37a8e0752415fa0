#!/usr/bin/env bash
# One entry point for a fresh machine (Debian, Python >= 3.11, root or sudo):
#
#   bash tools/dev.sh demo    set up, then run the main job on a bundled example
#   bash tools/dev.sh test    set up, then run the test suite (extra args go to pytest)
#
# The suite runs on every core (pytest-xdist, one test file per worker at a time: a file's
# module fixtures build once); OI_TEST_WORKERS=1 runs it in this process, OI_TEST_WORKERS=N on N.
#
# Set-up is idempotent and fast when already done: system packages are installed only when
# missing, and the virtual environment (.venv) is refreshed only when pyproject.toml changed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv="$root/.venv"

# Packages the whole pipeline needs: C toolchains for generated code and cffi (GCC, and Clang:
# the tests build generated code with both, tests/compilers.py), pkg-config for meson's
# dependency lookup, and the Vulkan stack (glslc, SPIR-V tools, loader + headers, Mesa's lavapipe
# CPU device, the Khronos validation layer) for the GPU target.
system_packages=(gcc clang libc6-dev pkg-config python3-venv glslc spirv-tools libvulkan-dev
                 mesa-vulkan-drivers vulkan-validationlayers)
# The Arm descriptors (devices/aarch64-*.json, armv7-generic.json) on an x86-64 machine: their
# cross compilers and C libraries, and QEMU's user-mode emulators that run what they build
# (`openinfer sim`, the tests; docs/synthesis.md, "Arm targets").
if [ "$(uname -m)" = x86_64 ]; then
    system_packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
                      qemu-user)
fi
# The microcontroller descriptors (devices/cortex-m*.json, riscv32-imac.json) on any machine:
# the bare-metal Arm and RISC-V compilers, their C libraries (newlib, picolibc), and QEMU's
# system emulators of their boards (docs/mcu.md).
system_packages+=(gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm gcc-riscv64-unknown-elf
                  picolibc-riscv64-unknown-elf qemu-system-misc)

log() { printf '[openinfer setup] %s\n' "$*" >&2; }

ensure_system_packages() {      # [PACKAGE...]: default, the system_packages above
    local missing=() pkg
    [ $# -gt 0 ] || set -- "${system_packages[@]}"
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    log "installing system packages: ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

# The serving tests (tests/serving/, docs/serving.md) run a real Triton Inference Server: the
# `nvidia-pytriton` wheel ships it, with its Python backend, in a virtual environment of its own
# (.venv-triton: the wheel pins numpy<2; the server's models need numpy alone). Its backend stub
# links the interpreter's shared libpython, a Debian package of its own.
triton_venv="$root/.venv-triton"

python_bin() {
    local py
    for py in python3.13 python3.12 python3.11 python3; do
        if command -v "$py" >/dev/null && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$py"; return 0
        fi
    done
    log "Python >= 3.11 is required"; return 1
}

ensure_venv() {
    local stamp="$venv/.openinfer-stamp" want
    want=$(sha256sum pyproject.toml | cut -d' ' -f1)
    if [ -x "$venv/bin/openinfer" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    if [ ! -x "$venv/bin/python" ]; then
        log "creating virtual environment in .venv"
        "$(python_bin)" -m venv "$venv"
    fi
    log "installing OpenInfer and its Python dependencies into .venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -e ".[test]"
    echo "$want" > "$stamp"
}

ensure_triton() {
    local stamp="$triton_venv/.openinfer-stamp" want="nvidia-pytriton"
    if [ -x "$triton_venv/bin/python3" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    local py
    py=$(python_bin)
    ensure_system_packages "libpython$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    log "installing the Triton Inference Server (nvidia-pytriton) into .venv-triton"
    [ -x "$triton_venv/bin/python3" ] || "$py" -m venv "$triton_venv"
    "$triton_venv/bin/python" -m pip install -q "$want"
    echo "$want" > "$stamp"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    demo)
        ensure_system_packages
        ensure_venv
        exec "$venv/bin/python" examples/demo.py "$@"
        ;;
    test)
        ensure_system_packages
        ensure_venv
        # the serving tests skip (saying why) where the server has no build: Linux on x86-64 or Arm64
        case "$(uname -s)-$(uname -m)" in Linux-x86_64|Linux-aarch64) ensure_triton ;; esac
        workers=${OI_TEST_WORKERS:-auto}
        # --durations: the slowest tests in every run's summary (CI's too), where the suite's time goes
        if [ "$workers" = 1 ]; then
            exec "$venv/bin/python" -m pytest --durations=40 "$@"
        fi
        exec "$venv/bin/python" -m pytest -n "$workers" --dist loadfile --durations=40 "$@"
        ;;
    *)
        sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
