#!/usr/bin/env bash
# The test command (README): installs dependencies, builds Kiln, runs the unit/op tests, the
# ONNX conformance suite (with a floor on the passed count), a fuzz smoke run (a second, clang
# ASan + UBSan build in build-asan/), and the model tests.
# Usage: ./scripts/test.sh [--quick]   (--quick skips the model tests that export torchvision models)
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

./scripts/setup.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_CUDA=AUTO >/dev/null
ninja -C build -j"$(nproc)"

echo "== unit, op and conformance tests (ctest)"
(cd build && ctest --output-on-failure -j"$(nproc)")

echo "== fuzz smoke run (each libFuzzer harness 15 s under ASan + UBSan; scripts/fuzz.sh)"
./scripts/fuzz.sh --smoke

if [ "$QUICK" = 0 ] && [ -x tests/models/run_model_tests.sh ]; then
  echo "== model tests"
  tests/models/run_model_tests.sh
fi
echo "== all tests passed"
