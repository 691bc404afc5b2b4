#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (issue 15): builds Kiln with
# Debian's clang in build-asan/ (CMake options KILN_SANITIZE=ON and KILN_FUZZ=ON: the fuzz
# harnesses of scripts/fuzz.sh share this build) and runs ctest there. Any sanitizer report fails
# the test that triggered it (halt_on_error; LeakSanitizer at each process exit).
#   scripts/sanitize.sh                 every ctest test but the Python package's (unit, op, pass, plan, CLI, conformance)
#   scripts/sanitize.sh -E conformance  ctest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_FUZZ="-O1 -gline-tables-only" -DKILN_WITH_CUDA=OFF \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=ON >/dev/null
# The test binaries ctest runs: kiln_tests, the CLI, and the LLM tools where this build has them.
targets=(kiln_cli kiln_tests)
for t in kiln_llm_tokenize kiln_llm_sentencepiece_tests; do
  ninja -C build-asan -t query "$t" >/dev/null 2>&1 && targets+=("$t")
done
nice ninja -C build-asan "${targets[@]}"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# The Python package's pytest is left out by default: an ASan-built extension cannot load into an
# uninstrumented interpreter.
[ $# -eq 0 ] && set -- -E '^python\.'
(cd build-asan && ctest --output-on-failure -j"$(nproc)" "$@")
echo "== the test suite is clean under ASan + UBSan"
