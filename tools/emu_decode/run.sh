#!/bin/sh
# attention.flash_decode (backends/cuda/attention_decode.cu) on the host, without a GPU: the file
# is compiled by g++ with CUDA threads as cooperative fibers (rdg_internal.h here), ldmatrix,
# mma.sync m16n8k16 and the shuffles emulated from the PTX fragment layouts (emu_mma.h), and
# cp.async copies queued per thread and landing as late as their wait_group allows (or at once),
# shared memory filled with NaN before each CTA. driver.inc runs decode cases through both ways
# (MMA for sm_80+ and SIMT), split-KV, element loads, grid-stride loops, and compares with
# tests/reference/attention_ref.c at the tolerances of tests/test_attention.c. A check of the
# kernel's logic (indexing, pipeline order, merges), not of the compiler or the hardware.
#
# Usage: tools/emu_decode/run.sh [BUILD_DIR [CASE_SUBSTRING | bench | config]]   (all cases: about 3
# minutes on 2 cores; config: the H200 shapes dec_config picks for the benchmark's decode cases)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root"/tools/emu_decode/rdg_internal.h "$root"/tools/emu_decode/emu_mma.h "$root"/tools/emu_decode/driver.inc "$work"
cd "$work"
python3 "$root/tools/emu_decode/patch.py" "$root"
CXX=${CXX:-g++}
CC=${CC:-gcc}
$CC -O1 -c -I"$root/tests" "$root/tests/reference/attention_ref.c" -o ref.o
$CXX -std=c++17 -O1 -I. -I"$root" -I"$root/include" -I"$build" -I"$build/include" -Wall -Wno-unused-function \
    -Wno-unknown-pragmas -c dec_emu.cpp -o dec_emu.o
$CXX dec_emu.o ref.o -lm -o dec_emu
shift 2>/dev/null || true
./dec_emu "$@"
