#!/usr/bin/env bash
# FP8 LLM engines on the GPU machine (carry .gpu-carry from scripts/gpu_carry.sh):
#   run(command="scripts/gpu_llm_fp8.sh", carry=[".gpu-carry"])
# 1. the FP8 step-graph / runner GPU tests; 2. GPT-2 124M (transformers init, fp16) built fp16 and
# fp16 + --quant fp8 (calibrated on 512 seeded token ids): greedy tokens of 8 prompts FP8 vs FP16 (common
# prefix) and `kiln bench-llm --cuda-graph` of both at KILN_LLM_BATCHES (default 1,64). Results in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
$C/kiln_tests --gtest_filter='GpuLlmStep*:LlmStepGraphFp8*:LlmCli.BuildLlmFp8:LlmEngineInfo*:GpuLlmRunner.*' > $OUT/fp8_tests.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/fp8_tests.txt | head
W=/tmp/llm; mkdir -p $W
"$PY" scripts/llm_hf_peer.py make $W --models gpt2 > /dev/null 2>&1
IDS=$("$PY" -c "import random; r=random.Random(3); print(','.join(str(r.randrange(100, 50000)) for _ in range(512)))")
"$C/kiln" build-llm $W/gpt2 -o $W/e16 --device gpu --dtype fp16 --max-batch 64 --max-seq-len 512 | tail -1
"$C/kiln" build-llm $W/gpt2 -o $W/e8 --device gpu --dtype fp16 --quant fp8 --calib-ids "$IDS" --max-batch 64 \
  --max-seq-len 512 2>&1 | tail -2
"$PY" - "$C/kiln" $W <<'PYEOF' | tee $OUT/fp8_greedy.json
import json, random, subprocess, sys
kiln, w = sys.argv[1:3]
r = random.Random(7)
res = []
for n in (5, 9, 17, 24, 33, 48, 64, 100):
    p = ",".join(str(r.randrange(100, 30000)) for _ in range(n))
    toks = []
    for e in ("e16", "e8"):
        out = subprocess.run([kiln, "generate", f"{w}/{e}", "--prompt-ids", p, "--max-new-tokens", "64", "--ignore-eos",
                              "--json"], capture_output=True, text=True)
        toks.append(json.loads(out.stdout)["tokens"] if out.returncode == 0 else out.stderr[-300:])
    a, b = toks
    res.append(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), 64) if isinstance(a, list) and isinstance(b, list) else str(b))
print(json.dumps({"model": "gpt2", "fp8_vs_fp16_greedy_common_prefix_of_64": res}))
PYEOF
for e in e16 e8; do
  "$C/kiln" bench-llm $W/$e --batch "${KILN_LLM_BATCHES:-1,64}" --input-len 128 --output-len 128 --cuda-graph \
    --json $OUT/bench_$e.json 2>&1 | tail -3
done
