#!/bin/bash
# The VK_NV_cooperative_matrix2 probe of docs/vulkan.md, run on the device tool's NVIDIA GPU:
#   f16 GEMM 4096^3 through gemm_cm2.comp over a sweep of tiles (vk_gemm.c), one run under the
#   Khronos validation layer, the register-only mma.sync rate (mma_peak.cu) and cuBLAS f16 (torch).
# Bookworm's glslang (12) and Vulkan headers (1.3.239) predate the extension; carry Debian
# trixie's in .gl-trixie/ (glslc, libshaderc1, libvulkan1, libvulkan-dev, vulkan-validationlayers;
# from deb.debian.org/debian/pool/main/{s/shaderc,v/vulkan-loader,v/vulkan-validationlayers}),
# and the GL dispatch libraries the NVIDIA ICD loads in .gl/ (docs/vulkan.md, "on the device"):
#   run(command="bash tools/bench/coopmat2/run.sh", carry=[".gl", ".gl-trixie"])
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for f in .gl/libegl1*.deb .gl/libglvnd0*.deb .gl/libopengl0*.deb .gl/libgl1*.deb .gl/libglx0*.deb \
         .gl/libgles2*.deb .gl-trixie/*.deb; do
    dpkg -x "$f" /
done
ldconfig
work=$(mktemp -d)
gcc -O2 -Wall -Wextra -Werror "$here/vk_gemm.c" -o "$work/vk_gemm" -lvulkan -lm
# THREADS BM BN BK
for cfg in "128 128 128 16" "128 128 128 32" "256 128 256 16" "256 128 256 32" "256 128 256 64" \
           "256 256 128 32" "256 128 128 32" "128 64 128 32" "64 64 64 16" "256 256 256 32"; do
    read -r threads bm bn bk <<< "$cfg"
    spv="$work/cm2_${threads}_${bm}_${bn}_${bk}.spv"
    glslc --target-env=vulkan1.3 -O -DTHREADS="$threads" -DBM="$bm" -DBN="$bn" -DBK="$bk" \
        "$here/gemm_cm2.comp" -o "$spv"
    echo "THREADS=$threads BM=$bm BN=$bn BK=$bk: $("$work/vk_gemm" "$spv" 4096 4096 4096 "$bm" "$bn" 20 | tail -2 | tr '\n' ' ')"
done
echo "under the validation layer (1024^3, 128x256x32 tiles):"
VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation "$work/vk_gemm" "$work/cm2_256_128_256_32.spv" 1024 1024 1024 128 256 2 2>&1 \
    | grep -E "VUID|Validation|check|RESULT" || true
nvcc -O3 -arch=sm_90 "$here/mma_peak.cu" -o "$work/mma_peak" && "$work/mma_peak"
python3 - <<'PY'
import torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.half)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.half)
for _ in range(10):
    a @ b
torch.cuda.synchronize()
e0, e1, best = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True), 1e9
for _ in range(5):
    e0.record()
    for _ in range(20):
        a @ b
    e1.record()
    torch.cuda.synchronize()
    best = min(best, e0.elapsed_time(e1) / 20)
print(f"cuBLAS f16 4096^3: {2 * 4096 ** 3 / best / 1e9:.1f} TFLOP/s")
PY
