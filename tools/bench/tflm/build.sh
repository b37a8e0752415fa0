#!/bin/bash
# The TFLM + CMSIS-NN peer of docs/peers.md: TensorFlow Lite Micro's library for each core
# (cortex_m_generic, OPTIMIZED_KERNEL_DIR=cmsis_nn) and this folder's harness linked with it, one
# firmware ELF per MLPerf Tiny model and core, which tools/bench/tflm_peer.py runs under QEMU.
#
#     PEERS=/work/peers tools/bench/tflm/build.sh [populate|lib|elf|all]    (default: all)
#
# Environment: PEERS (where the peer trees go, outside the repository: $PEERS/tflite-micro),
# MIRROR (local git mirrors of the GitHub repositories: $MIRROR/OWNER+NAME/repo), MODELS (the
# MLPerf Tiny .tflite files), PYTHON (one that imports openinfer: the board memory maps),
# TFLM_COMMIT, BUILD_TYPE (release), JOBS, TFLM_LIB (elf: link this archive instead of lib's). Every command is echoed (set -x). TFLM's makefile runs
# python3 with numpy and Pillow at parse time (its examples' generate_cc_arrays.py): populate makes
# the venv $PEERS/venv with them (pip), and lib puts it first on PATH.
#
# populate: TFLM is cloned from its mirror at TFLM_COMMIT, and each third-party tree its make build
# would download (tensorflow/lite/micro/tools/make/*download*.sh, third_party_downloads.inc) is
# exported from its mirror at the commit or tag that TFLM's scripts pin (read from the scripts
# themselves), post-processed as those scripts do (BUILD files deleted, TFLM's patches applied), and
# placed where they expect it (tensorflow/lite/micro/tools/make/downloads/NAME): the make build then
# finds every download present and fetches nothing.
# lib: libtensorflow-microlite.a for cortex-m4+fp and cortex-m55 with Debian's arm-none-eabi-gcc
# (TOOLCHAIN=gcc TARGET_TOOLCHAIN_ROOT=/usr/bin/), TFLM's default optimization levels (-Os for the
# framework, -O2 for its kernels and CMSIS-NN's).
# elf: for each core and model: the model as a C array (xxd -i), the harness (tflm_harness.cc,
# startup.c) compiled with the library's flags, laid out by harness.ld over the board's memory map
# (openinfer/firmware.py BOARDS: mps2-an386 for the Cortex-M4, mps3-an547 for the Cortex-M55).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
PEERS=${PEERS:-/work/peers}
MIRROR=${MIRROR:-/work/.mirror}
MODELS=${MODELS:-/work/mlperf}
PYTHON=${PYTHON:-/work/main/.venv/bin/python}
TFLM_COMMIT=${TFLM_COMMIT:-90b983c2b3f1480642e040bbd2ddb37b998f3424}
BUILD_TYPE=${BUILD_TYPE:-release}
JOBS=${JOBS:-2}
TFLM=$PEERS/tflite-micro
MAKE_DIR=tensorflow/lite/micro/tools/make
DOWNLOADS=$TFLM/$MAKE_DIR/downloads
OUT=${OUT:-$PEERS/tflm-build}
CORES=${CORES:-"cortex-m4 cortex-m55"}
MODEL_NAMES=${MODEL_NAMES:-"kws_ref_model vww_96_int8 pretrainedResnet_quant ad01_int8"}

# the TFLM TARGET_ARCH, the compiler's flags (those the TFLM makefile gives the library) and the
# QEMU board of each core
tflm_arch() { case $1 in cortex-m4) echo cortex-m4+fp ;; cortex-m55) echo cortex-m55 ;; esac; }
core_flags() {
  case $1 in
    cortex-m4) echo "-mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard -DCPU_M4=1" ;;
    cortex-m55) echo "-mcpu=cortex-m55 -mfpu=auto -mfloat-abi=hard -DCPU_M55=1" ;;
  esac
}
board() { case $1 in cortex-m4) echo mps2-an386 ;; cortex-m55) echo mps3-an547 ;; esac; }

# a pin: the first value of VAR="..." (or VAR := "...") in a TFLM file
pin() { sed -n "s/^ *$2 *:\?= *\"\?\([^\"]*\)\"\?.*/\1/p" "$TFLM/$1" | head -1; }

# export TREE (a GitHub owner+name) at REV into DEST, its BUILD files deleted as the scripts do
export_tree() {
  local tree=$1 rev=$2 dest=$3
  rm -rf "$dest.part" && mkdir -p "$dest.part"
  git --git-dir="$MIRROR/$tree/repo" archive --format=tar "$rev^{commit}" | tar -x -C "$dest.part"
  find "$dest.part" -type f \( -name BUILD -o -name BUILD.bazel \) -delete
  mv "$dest.part" "$dest"
}

populate() {
  if [ ! -d "$TFLM/.git" ]; then
    git clone -q "$MIRROR/tensorflow+tflite-micro/repo" "$TFLM"
  fi
  git -C "$TFLM" checkout -q "$TFLM_COMMIT"
  [ -x "$PEERS/venv/bin/python3" ] || { python3 -m venv "$PEERS/venv" && "$PEERS/venv/bin/pip" install -q numpy pillow; }
  mkdir -p "$DOWNLOADS"
  local cmsis cmsis_dfp cmsis_nn flatbuffers kissfft gemmlowp ruy pigweed
  cmsis=$(pin $MAKE_DIR/ext_libs/cmsis_download.sh ZIP_PREFIX)
  cmsis_dfp=$(sed -n 's/^ *ZIP_PREFIX="\(.*\)"/\1/p' "$TFLM/$MAKE_DIR/ext_libs/cmsis_download.sh" | sed -n 2p)
  cmsis_nn=$(pin $MAKE_DIR/ext_libs/cmsis_nn_download.sh ZIP_PREFIX_NN)
  flatbuffers=$(pin $MAKE_DIR/flatbuffers_download.sh ZIP_PREFIX)
  kissfft=$(pin $MAKE_DIR/third_party_downloads.inc KISSFFT_URL | sed 's|.*/tags/\(.*\)\.zip|\1|')
  gemmlowp=$(pin $MAKE_DIR/third_party_downloads.inc GEMMLOWP_URL | sed 's|.*/archive/\(.*\)\.zip|\1|')
  ruy=$(pin $MAKE_DIR/third_party_downloads.inc RUY_URL | sed 's|.*/archive/\(.*\)\.zip|\1|')
  pigweed=$(sed -n 's/^ *git checkout \([0-9a-f]\{40\}\).*/\1/p' "$TFLM/$MAKE_DIR/pigweed_download.sh")
  # cmsis_download.sh: CMSIS_6, and Cortex_DFP inside it
  [ -d "$DOWNLOADS/cmsis" ] || {
    export_tree ARM-software+CMSIS_6 "$cmsis" "$DOWNLOADS/cmsis"
    export_tree ARM-software+Cortex_DFP "$cmsis_dfp" "$DOWNLOADS/cmsis/Cortex_DFP"
  }
  [ -d "$DOWNLOADS/cmsis_nn" ] || export_tree ARM-software+CMSIS-NN "$cmsis_nn" "$DOWNLOADS/cmsis_nn"
  # download_and_extract.sh (third_party.inc): patch -p1 with TFLM's patches
  [ -d "$DOWNLOADS/flatbuffers" ] || {
    export_tree google+flatbuffers "$flatbuffers" "$DOWNLOADS/flatbuffers"
    patch -p1 -d "$DOWNLOADS/flatbuffers" < "$TFLM/$MAKE_DIR/flatbuffers.patch"
  }
  [ -d "$DOWNLOADS/kissfft" ] || {
    export_tree mborgerding+kissfft "$kissfft" "$DOWNLOADS/kissfft"
    patch -p1 -d "$DOWNLOADS/kissfft" < "$TFLM/third_party/kissfft/kissfft.patch"
  }
  [ -d "$DOWNLOADS/gemmlowp" ] || export_tree google+gemmlowp "$gemmlowp" "$DOWNLOADS/gemmlowp"
  [ -d "$DOWNLOADS/ruy" ] || export_tree google+ruy "$ruy" "$DOWNLOADS/ruy"
  # pigweed_download.sh (git clone + checkout, BUILD files deleted, pigweed.patch); no library
  # source includes it, but the makefile runs the script at every start
  [ -d "$DOWNLOADS/pigweed" ] || {
    export_tree google+pigweed "$pigweed" "$DOWNLOADS/pigweed"
    git -C "$DOWNLOADS/pigweed" init -q && git -C "$DOWNLOADS/pigweed" apply \
      --ignore-space-change --ignore-whitespace "$TFLM/$MAKE_DIR/pigweed.patch"
    rm -rf "$DOWNLOADS/pigweed/.git"
  }
  # the commits used, for docs/peers.md
  {
    echo "tflite-micro $(git -C "$TFLM" rev-parse HEAD)"
    echo "CMSIS_6 $(git --git-dir="$MIRROR/ARM-software+CMSIS_6/repo" rev-parse "$cmsis^{commit}")"
    echo "Cortex_DFP $(git --git-dir="$MIRROR/ARM-software+Cortex_DFP/repo" rev-parse "$cmsis_dfp^{commit}")"
    echo "CMSIS-NN $(git --git-dir="$MIRROR/ARM-software+CMSIS-NN/repo" rev-parse "$cmsis_nn^{commit}")"
    echo "flatbuffers $flatbuffers $(git --git-dir="$MIRROR/google+flatbuffers/repo" rev-parse "$flatbuffers^{commit}")"
    echo "kissfft $kissfft $(git --git-dir="$MIRROR/mborgerding+kissfft/repo" rev-parse "$kissfft^{commit}")"
    echo "gemmlowp $(git --git-dir="$MIRROR/google+gemmlowp/repo" rev-parse "$gemmlowp^{commit}")"
    echo "ruy $(git --git-dir="$MIRROR/google+ruy/repo" rev-parse "$ruy^{commit}")"
    echo "pigweed $(git --git-dir="$MIRROR/google+pigweed/repo" rev-parse "$pigweed^{commit}")"
  } > "$PEERS/commits.txt"
}

lib() {
  local core
  for core in $CORES; do
    PATH=$PEERS/venv/bin:$PATH make -C "$TFLM" -f $MAKE_DIR/Makefile -j"$JOBS" TARGET=cortex_m_generic TARGET_ARCH="$(tflm_arch "$core")" \
      OPTIMIZED_KERNEL_DIR=cmsis_nn BUILD_TYPE="$BUILD_TYPE" TOOLCHAIN=gcc TARGET_TOOLCHAIN_ROOT=/usr/bin/ microlite
  done
}

elf() {
  local core model flags defines lib inc memory
  for core in $CORES; do
    lib=${TFLM_LIB:-$TFLM/gen/cortex_m_generic_$(tflm_arch "$core")_${BUILD_TYPE}_cmsis_nn_gcc/lib/libtensorflow-microlite.a}
    mkdir -p "$OUT/$core"
    # the board's memory map, from openinfer/firmware.py
    memory=$OUT/$core/memory.ld
    (cd "$REPO" && "$PYTHON" -c 'import sys
from openinfer.firmware import BOARDS
b = BOARDS[sys.argv[1]]
print(f"/* {b.doc}: openinfer/firmware.py BOARDS[{sys.argv[1]!r}] */\nMEMORY {{")
for name, attrs, r in (("code", "rx", b.code), ("ram", "rwx", b.ram), ("bulk", "rw", b.bulk)):
    print(f"    {name} ({attrs}) : ORIGIN = 0x{r.origin:08x}, LENGTH = 0x{r.length:x}")
print("}")' "$(board "$core")") > "$memory"
    flags="$(core_flags "$core") -mthumb -mlittle-endian -funsigned-char -O2 -ffunction-sections -fdata-sections
      -fno-unwind-tables -fno-asynchronous-unwind-tables -Wall -Wextra -Werror"
    # the defines the library was built with (TFLM's Makefile: COMMON_FLAGS, BUILD_TYPE, the
    # OPTIMIZED_KERNEL_DIR's, the target's), which its headers read
    defines="-DTF_LITE_STATIC_MEMORY -DTF_LITE_DISABLE_X86_NEON -DCMSIS_NN -DTF_LITE_MCU_DEBUG_LOG -DNDEBUG"
    [ "$BUILD_TYPE" != release ] || defines="$defines -DTF_LITE_STRIP_ERROR_STRINGS"
    # -isystem: TFLM's headers are not held to -Wextra -Werror (unused parameters), the harness is
    inc="-isystem $TFLM -isystem $DOWNLOADS/flatbuffers/include -isystem $DOWNLOADS/gemmlowp -isystem $DOWNLOADS/ruy"
    # shellcheck disable=SC2086
    arm-none-eabi-gcc $flags -std=c11 -c "$HERE/startup.c" -o "$OUT/$core/startup.o"
    for model in $MODEL_NAMES; do
      (cd "$MODELS" && xxd -i -n oi_model_data "$model.tflite") \
        | sed 's/^unsigned char/alignas(16) const unsigned char/; s/^unsigned int/const unsigned int/' \
        > "$OUT/$core/${model}_data.h"
      # shellcheck disable=SC2086
      arm-none-eabi-g++ $flags $defines $inc -std=c++17 -fno-rtti -fno-exceptions -fno-threadsafe-statics \
        -DOI_MODEL_DATA="\"$OUT/$core/${model}_data.h\"" -DOI_MODEL_"$(echo "$model" | tr a-z A-Z)" \
        -c "$HERE/tflm_harness.cc" -o "$OUT/$core/$model.o"
      # shellcheck disable=SC2086
      arm-none-eabi-g++ $flags -nostartfiles -L"$OUT/$core" -T "$HERE/harness.ld" -Wl,--gc-sections \
        --specs=nano.specs --specs=nosys.specs -Wl,-Map="$OUT/$core/$model.map" \
        "$OUT/$core/startup.o" "$OUT/$core/$model.o" "$lib" -lm \
        -o "$OUT/$core/$model.elf"
      arm-none-eabi-size "$OUT/$core/$model.elf"
    done
  done
}

set -x
case ${1:-all} in
  populate) populate ;;
  lib) lib ;;
  elf) elf ;;
  all) populate; lib; elf ;;
  *) echo "usage: $0 [populate|lib|elf|all]" >&2; exit 2 ;;
esac
