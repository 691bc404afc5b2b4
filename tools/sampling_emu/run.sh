#!/usr/bin/env bash
# Host emulation check of the GPU sampling kernels (src/backends/cuda/kernels_sampling.cu,
# docs/decisions/0077 and its addendum) — no GPU needed. emu.h runs a kernel's blocks one after
# another, each block's 512 threads as ucontext fibers with __syncthreads / warp collectives as
# fiber barriers (a barrier not reached by every thread aborts as a deadlock). driver.cc runs the
# current kernels and those of a reference commit (default b7c3c58: the single-block kernel measured
# on the H200) on the same logits / options / step tokens — 13 rows covering greedy, temperature
# alone, top-k, top-p, both, penalties, top_k 1024 / 1025 / V - 1, an inactive row, ties (variant 1,
# logits on a 0.5 grid, -0 included), constant rows, NaN / inf (variant 2) — over 3 steps (bitmap
# resets at position 0 in step 2) and requires bitwise-equal tokens, non-finite ids, distributions
# and seen bitmaps. Host expf stands in for the device's on both sides, so it checks the
# algorithms, not the device math. Usage: tools/sampling_emu/run.sh [REF_COMMIT] [V ...]
# (default V: 1000 9000; 9000 spans 3 chunks and takes ~30 s per variant, 50257 a few minutes).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REF=${1:-b7c3c58}
shift || true
VS=${*:-1000 9000}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$ROOT" "$REF" "$W" <<'PY'
import re, subprocess, sys
root, ref, w = sys.argv[1:4]
def transform(src, old):
    def rl(m):
        return f'emu::launch({m.group(2)}, {m.group(3)}, [&] {{ {m.group(1)}({m.group(4)}); }});'
    src = re.sub(r'(\w+)<<<(.*?),\s*(kThreads),\s*0,\s*stream>>>\((.*?)\);', rl, src, flags=re.S)
    if old: src = src.replace('launch_sample_rows(', 'launch_sample_rows_old(')
    return src
open(f'{w}/new.cc', 'w').write(transform(open(f'{root}/src/backends/cuda/kernels_sampling.cu').read(), False))
old = subprocess.check_output(['git', '-C', root, 'show', f'{ref}:src/backends/cuda/kernels_sampling.cu']).decode()
open(f'{w}/old.cc', 'w').write(transform(old, True))
PY
# The reference kernel is compiled against its own header (its launcher has no scratch argument).
mkdir -p "$W/ref/backends/cuda"
git -C "$ROOT" show "$REF:src/backends/cuda/kernels_sampling.h" > "$W/ref/backends/cuda/kernels_sampling.h"
INC="-I$ROOT/tools/sampling_emu -I$ROOT/src -I$ROOT/include"
g++ -O2 -std=c++17 $INC -x c++ "$W/new.cc" -c -o "$W/new.o"
g++ -O2 -std=c++17 -I$ROOT/tools/sampling_emu -I"$W/ref" -I$ROOT/src -I$ROOT/include -x c++ "$W/old.cc" -c -o "$W/old.o"
g++ -O2 -std=c++17 $INC "$ROOT/tools/sampling_emu/driver.cc" "$W/new.o" "$W/old.o" -o "$W/emu_test"
rc=0
for V in $VS; do
  for variant in 0 1 2; do
    "$W/emu_test" "$V" "$variant" 3 | grep -E "MISMATCH|PASS|FAIL" || rc=1
  done
done
exit $rc
