#!/usr/bin/env bash
# GPU sampling (docs/decisions/0077) on the GPU machine, after scripts/gpu_carry.sh here and the
# kernel microbenchmark built into the carry:
#   nvcc -O2 -std=c++17 -arch=sm_90 -Isrc -Iinclude bench/micro/sampling.cu src/backends/cuda/kernels_sampling.cu \
#     -o .gpu-carry/sampling_bench
#   run(command="KILN_LLM_MODELS=gpt2 scripts/gpu_sampling.sh", carry=[".gpu-carry"])
#   run(command="KILN_SAMPLING_TESTS=0 KILN_LLM_MODELS=llama1b scripts/gpu_sampling.sh", carry=[".gpu-carry"])
# (one model per call: host sampling of top-p over a 128k vocabulary sorts every row on the host,
# ~10 ms a row, so its batch-64 runs alone take minutes). Steps:
#   1. (unless KILN_SAMPLING_TESTS=0) the GPU sampler's tests (kernel vs the host Sampler, Philox
#      draws, determinism, chi-square, seen-id bitmaps) and the LLM runner's GPU and CPU tests;
#   2. (idem) the kernel alone (bench/micro/sampling.cu: R 1/8/64 x V 50,257/128,256 x five option mixes,
#      beside the D2H copy of the same logits rows host sampling needed; $OUT/sampling_kernel.jsonl);
#   3. checkpoints made by transformers (scripts/llm_hf_peer.py make; KILN_LLM_MODELS, default
#      gpt2,llama1b: vocab 50,257 and 128,256) built with `kiln build-llm --device gpu --dtype fp16`;
#      a seeded sampled `kiln generate` run twice must give the same tokens;
#   4. `kiln bench-llm --cuda-graph` (128 in / 128 out, batch KILN_LLM_BATCHES, default 1,8,64) greedy,
#      then sampled (temperature 0.8, top-k 50, top-p 0.9, repetition penalty 1.1; and top-p 0.95 alone,
#      the whole vocabulary in play) with the GPU sampler and with --host-sampling (the logits rows
#      copied back and sampled by the host Sampler: the path before 0077; no warm-up call, it would
#      double the slowest runs), all on the same card in this one run ($OUT/sampling_bench.jsonl; one
#      line per model x mode).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh  # C, PY, LD_LIBRARY_PATH
W=/tmp/llm_sampling; mkdir -p $W
MODELS=${KILN_LLM_MODELS:-gpt2,llama1b}
BATCHES=${KILN_LLM_BATCHES:-1,8,64}

if [ "${KILN_SAMPLING_TESTS:-1}" = 1 ]; then
  stamp "== tests"
  "$C/kiln_tests" --gtest_filter='GpuSampling*:GpuLlmRunner*:LlmSampling*:LlmRunner*' 2>&1 | tail -30
  stamp "== kernel microbenchmark"
  if [ -x "$C/sampling_bench" ]; then
    "$C/sampling_bench" | tee "$OUT/sampling_kernel.jsonl"
  else
    echo "no $C/sampling_bench (build it into the carry: see the top of this script)"
  fi
fi

stamp "== checkpoints ($MODELS)"
"$PY" scripts/llm_hf_peer.py make $W --models "$MODELS" 2>&1 | grep -v Warning | tail -5
for m in ${MODELS//,/ }; do
  d=$W/$m; e=$W/engine_$m
  stamp "== $m: build-llm"
  "$C/kiln" build-llm "$d" -o "$e" --device gpu --dtype fp16 --max-batch 64 --max-seq-len 512 --max-num-tokens 2048 \
    > $W/build_$m.txt 2>&1 || { tail -20 $W/build_$m.txt; continue; }
  tail -1 $W/build_$m.txt
  stamp "== $m: seeded sampling twice"
  args=(--prompt-ids 5,17,42,7,99,3,11,64 --max-new-tokens 48 --ignore-eos --temperature 0.8 --top-k 50 --top-p 0.9
        --repetition-penalty 1.1 --seed 7 --json)
  a=$("$C/kiln" generate "$e" "${args[@]}") && b=$("$C/kiln" generate "$e" "${args[@]}")
  "$PY" - "$m" "$a" "$b" <<'PYEOF'
import json, sys
m, a, b = sys.argv[1], json.loads(sys.argv[2])["tokens"], json.loads(sys.argv[3])["tokens"]
print(f"{m}: {len(a)} sampled tokens, run twice: {'identical' if a == b else 'DIFFERENT'}; {len(set(a))} distinct")
PYEOF
  for mode in greedy gpu host gpu_topp host_topp; do
    case $mode in
      greedy) flags=() ;;
      gpu) flags=(--temperature 0.8 --top-k 50 --top-p 0.9 --repetition-penalty 1.1) ;;
      host) flags=(--temperature 0.8 --top-k 50 --top-p 0.9 --repetition-penalty 1.1 --host-sampling --warmup 0) ;;
      gpu_topp) flags=(--temperature 1.0 --top-p 0.95) ;;
      host_topp) flags=(--temperature 1.0 --top-p 0.95 --host-sampling --warmup 0) ;;
    esac
    stamp "== $m: bench-llm $mode"
    "$C/kiln" bench-llm "$e" --batch "$BATCHES" --input-len 128 --output-len 128 --cuda-graph "${flags[@]}" \
      --json $W/kb_${m}_$mode.json > $W/kb_${m}_$mode.txt 2>&1 || tail -5 $W/kb_${m}_$mode.txt
    tail -3 $W/kb_${m}_$mode.txt
    "$PY" -c "import json,sys; print(json.dumps({'model': sys.argv[2], 'mode': sys.argv[3], 'kiln': json.load(open(sys.argv[1]))}))" \
      $W/kb_${m}_$mode.json $m $mode >> "$OUT/sampling_bench.jsonl" 2>/dev/null
  done
done
stamp "done"
