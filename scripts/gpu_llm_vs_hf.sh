#!/usr/bin/env bash
# Issue 13 acceptance on the GPU machine (carry .gpu-carry from scripts/gpu_carry.sh):
#   run(command="scripts/gpu_llm_vs_hf.sh", carry=[".gpu-carry"])
# Checkpoints made there by transformers (scripts/llm_hf_peer.py make: GPT-2 124M, a Llama-3.2-1B-shaped
# and a Qwen2-0.5B-shaped model, random init, fp16; KILN_LLM_MODELS), each built with
# `kiln build-llm --device gpu --dtype fp16`, then
#   1. greedy: `kiln generate` of 8 seeded prompts x 64 new tokens vs transformers' FP16 generate (eos off):
#      identical prompts and where the others first differ ($OUT/llm_greedy.jsonl);
#   2. speed (KILN_LLM_BENCH=1): `kiln bench-llm --cuda-graph` at batch KILN_LLM_BATCHES (default 1,8,64),
#      128 in / 128 out, beside transformers' static KV cache + torch.compile (reduce-overhead) on the same
#      checkpoint and shapes (KILN_LLM_PEER=compile|eager|none), all in this one run ($OUT/llm_bench.jsonl).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh  # C, PY, LD_LIBRARY_PATH
W=/tmp/llm; mkdir -p $W
MODELS=${KILN_LLM_MODELS:-gpt2,llama1b,qwen05b}
BATCHES=${KILN_LLM_BATCHES:-1,8,64}
stamp "== checkpoints ($MODELS)"
"$PY" scripts/llm_hf_peer.py make $W --models "$MODELS" 2>&1 | grep -v Warning | tail -5
"$PY" - > $W/prompts.json <<'PYEOF'
import json, random
r = random.Random(7)
print(json.dumps([[r.randrange(100, 30000) for _ in range(n)] for n in (5, 9, 17, 24, 33, 48, 64, 100)]))
PYEOF
for m in ${MODELS//,/ }; do
  d=$W/$m; e=$W/engine_$m
  stamp "== $m: build-llm"
  "$C/kiln" build-llm "$d" -o "$e" --device gpu --dtype fp16 --max-batch 64 --max-seq-len 512 --max-num-tokens 2048 \
    > $W/build_$m.txt 2>&1 || { tail -20 $W/build_$m.txt; continue; }
  tail -2 $W/build_$m.txt
  stamp "== $m: greedy vs transformers"
  "$PY" scripts/llm_hf_peer.py reference "$d" --prompts $W/prompts.json --new-tokens 64 --out $W/ref_$m.json \
    --logits-dir $W/logits_$m 2>&1 | grep -v Warning | tail -3
  "$PY" - "$C/kiln" "$e" "$m" $W/prompts.json $W/ref_$m.json <<'PYEOF' | tee -a "$OUT/llm_greedy.jsonl"
import json, subprocess, sys
kiln, e, m, prompts, ref = sys.argv[1:6]
prompts, ref = json.load(open(prompts)), json.load(open(ref))["prompts"]
same, firsts, ttft, notes = 0, [], [], []
def prefix(x, y):
    return next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
for p, r in zip(prompts, ref):
    out = subprocess.run([kiln, "generate", e, "--prompt-ids", ",".join(map(str, p)), "--max-new-tokens", "64",
                          "--ignore-eos", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        print(json.dumps({"model": m, "error": out.stderr[-500:]})); sys.exit(0)
    got = json.loads(out.stdout)
    toks, want = got["tokens"], r["greedy_fp16"]
    first = next((i for i, (a, b) in enumerate(zip(toks, want)) if a != b), None)
    same += first is None and len(toks) == len(want)
    firsts.append(first)
    ttft.append(got.get("ttft_ms"))
    if first is not None:
        # transformers' own FP16 top-2 margin at that step (relative to its largest |logit|), and how far Kiln
        # FP16 and transformers FP16 each agree with transformers FP32.
        notes.append({"first": first, "hf16_top2_margin_rel": round(r["fp16_top2_margin"][first] /
                                                                    max(r["fp16_logit_scale"][first], 1e-9), 5),
                      "kiln_vs_hf32_prefix": prefix(toks, r["greedy_fp32"]),
                      "hf16_vs_hf32_prefix": prefix(want, r["greedy_fp32"])})
print(json.dumps({"model": m, "prompts": len(prompts), "identical_64_tokens": same, "first_difference": firsts,
                  "differences": notes, "kiln_ttft_ms": ttft}))
PYEOF
  if [ "${KILN_LLM_BENCH:-1}" = 1 ]; then
    stamp "== $m: kiln bench-llm"
    "$C/kiln" bench-llm "$e" --batch "$BATCHES" --input-len 128 --output-len 128 --cuda-graph --json $W/kb_$m.json \
      > $W/kb_$m.txt 2>&1 || tail -5 $W/kb_$m.txt
    "$PY" -c "import json,sys; print(json.dumps({'model': sys.argv[2], 'kiln': json.load(open(sys.argv[1]))}))" \
      $W/kb_$m.json $m >> "$OUT/llm_bench.jsonl" 2>/dev/null
    tail -6 $W/kb_$m.txt
    if [ "${KILN_LLM_PEER:-compile}" != none ]; then
      stamp "== $m: transformers peer (${KILN_LLM_PEER:-compile})"
      flag=""; [ "${KILN_LLM_PEER:-compile}" = compile ] && flag=--compile
      "$PY" scripts/llm_hf_peer.py bench "$d" --batch "$BATCHES" --input-len 128 --output-len 128 $flag \
        --max-seconds ${KILN_LLM_PEER_SECONDS:-150} --out $W/pb_$m.json 2>&1 | grep "^\[peer\]"
      "$PY" -c "import json,sys; print(json.dumps({'model': sys.argv[2], 'peer': json.load(open(sys.argv[1]))}))" \
        $W/pb_$m.json $m >> "$OUT/llm_bench.jsonl" 2>/dev/null
    fi
  fi
done
stamp "done"
