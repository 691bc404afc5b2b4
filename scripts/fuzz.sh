#!/usr/bin/env bash
# Fuzzing (issue 15): builds Kiln's libFuzzer harnesses with Debian's clang
# (-fsanitize=fuzzer,address,undefined; CMake options KILN_FUZZ + KILN_SANITIZE in build-asan/, the
# same build scripts/sanitize.sh runs the test suite in), writes the seed
# corpora (fuzz/seed_corpus.cc: the tests' models, plans built from them, small .npy files, plus
# the ONNX backend test data's models when libonnx-testdata is installed) and runs each harness.
#
#   scripts/fuzz.sh --smoke                  each harness 15 s (scripts/test.sh runs this)
#   scripts/fuzz.sh                          each harness 1 hour, one after another
#   scripts/fuzz.sh --seconds 28800 --jobs 2 fuzz_onnx_build   an 8-hour campaign on 2 cores
#
# Corpora grow in build-asan/corpus/<harness> across runs; a crash leaves build-asan/crash-*
# (reproduce: build-asan/<harness> build-asan/crash-...), which becomes a regression test
# (tests/plan/untrusted_input_test.cc). Exit code 1 when any harness found a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=3600
JOBS=1
HARNESSES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SECS=15 ;;
    --seconds) SECS="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    fuzz_*) HARNESSES+=("$1") ;;
    *) echo "usage: $0 [--smoke] [--seconds N] [--jobs N] [fuzz_onnx_build|fuzz_plan_run|fuzz_npy ...]"; exit 2 ;;
  esac
  shift
done
[ ${#HARNESSES[@]} -eq 0 ] && HARNESSES=(fuzz_onnx_build fuzz_plan_run fuzz_npy)

export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_FUZZ="-O1 -gline-tables-only" -DKILN_WITH_CUDA=OFF \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=ON >/dev/null
nice ninja -C build-asan "${HARNESSES[@]}" fuzz_seed_corpus

rm -rf build-asan/seeds
build-asan/fuzz_seed_corpus build-asan/seeds
TESTDATA=/usr/share/libonnx-testdata/data
if [ -d "$TESTDATA" ]; then
  # The smoke run reads a sample (every seed runs through a full build before fuzzing starts).
  LIMIT=100000; [ "$SECS" -le 60 ] && LIMIT=40
  find "$TESTDATA" -name model.onnx | sort > build-asan/seeds/testdata.txt
  # Spread the sample over the suites (every k-th model), not the first N of one.
  total=$(wc -l < build-asan/seeds/testdata.txt)
  step=$(( total / LIMIT )); [ "$step" -lt 1 ] && step=1
  awk -v s="$step" 'NR % s == 0' build-asan/seeds/testdata.txt | while read -r m; do
    cp "$m" "build-asan/seeds/onnx/$(echo "${m#$TESTDATA/}" | tr '/' '_')"
  done
fi

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
status=0
for h in "${HARNESSES[@]}"; do
  case "$h" in
    fuzz_onnx_build) seeds=build-asan/seeds/onnx; extra=(-max_len=65536) ;;
    fuzz_plan_run) seeds=build-asan/seeds/plan; extra=(-max_len=65536 -use_value_profile=1) ;;
    fuzz_npy) seeds=build-asan/seeds/npy; extra=(-max_len=4096) ;;
  esac
  mkdir -p "build-asan/corpus/$h"
  log="build-asan/$h.log"
  echo "== $h: ${SECS} s, $JOBS job(s), seeds $(ls "$seeds" | wc -l), log $log"
  args=(-max_total_time="$SECS" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-asan/
        "${extra[@]}" "build-asan/corpus/$h" "$seeds")
  if [ "$JOBS" -gt 1 ]; then args=(-fork="$JOBS" "${args[@]}"); fi
  if build-asan/"$h" "${args[@]}" >"$log" 2>&1; then
    # "stat::number_of_executed_units", execs/s and coverage, from libFuzzer's own report.
    grep -E "^stat::number_of_executed_units|^stat::average_exec_per_sec|cov: " "$log" | tail -3
  else
    status=1
    echo "!! $h found a problem:"; grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$log" | head -20
  fi
done
exit $status
