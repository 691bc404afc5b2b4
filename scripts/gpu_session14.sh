#!/usr/bin/env bash
# Session 14's GPU checks (carry .gpu-carry from scripts/gpu_carry.sh):
#   run(command="KILN_STEPS='tests llm1b llm8b' scripts/gpu_session14.sh", carry=[".gpu-carry"])
# As session 13's, with bench-llm --profile-decode (per-layer device times of the last decode step at
# each batch: where a token's time goes; the JSON of each bench is kept in $OUT) and the skinny-GEMM
# tests (decision 0089).
# Steps (KILN_STEPS):
#   tests   kiln_tests on KILN_TEST_FILTER (default: plan load / packed weights / LLM step / FP8 rows)
#   llm1b   the Llama-3.2-1B shape: build-llm fp16 with -v (each build step's seconds and peak host
#           memory: decision 0087), bench-llm -> $OUT/llm.jsonl, the build log -> $OUT/build_llama1b_fp16.txt
#   llm8b   the Llama-3.1-8B shape (scripts/llm_hf_peer.py make llama8b: transformers' init on the GPU, fp16,
#           16 GB) and its decode bound (weight bytes / measured device copy rate); build-llm for each of
#           KILN_LLM8B_CONFIGS (fp16, fp8t = --quant fp8 per-tensor) with -v, bench-llm at KILN_LLM_BATCHES
#           -> $OUT/llm.jsonl
#   kv1b    the Llama-1B shape with an fp16 vs an FP8 KV cache (--kv-cache fp8, calibrated scales): speed, and
#           greedy agreement of 4 prompts x 32 tokens between the two engines -> $OUT/llm.jsonl
#   peer8b  transformers static cache + torch.compile on the same 8B checkpoint and shapes -> $OUT/llm8b_peer.json
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
STEPS=${KILN_STEPS:-tests llm1b llm8b}
BATCHES=${KILN_LLM_BATCHES:-1,64}
W=/tmp/llm; mkdir -p $W
stamp "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, THP $(cat /sys/kernel/mm/transparent_hugepage/enabled), disk $(df -h /tmp | awk 'NR==2{print $4}') free"
if has tests; then
  stamp "== GPU tests"
  F=${KILN_TEST_FILTER:-'GpuGemv*:GpuRope*:GpuPlanLoad*:GpuPaged*:GpuLlmStep*:GpuLlmRunner*:GpuModel*:GpuIoDtypes*:GpuPackedDynamic*:GpuTransformer*:OpTable/OpTableCuda.*Gemm*:OpTable/OpTableCuda.*MatMul*:LlmStepGraphFp8*'}
  TMAX=$(( $(left) - 30 )); [ "$TMAX" -gt "${KILN_TEST_MAX_S:-100000}" ] && TMAX=$KILN_TEST_MAX_S
  timeout $TMAX $C/kiln_tests --gtest_filter="$F" > "$OUT/gpu_tests.txt" 2>&1
  echo "rc=$?" >> "$OUT/gpu_tests.txt"
  grep -E "^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|tests ran|rc=" "$OUT/gpu_tests.txt" | head -30
  grep -E "Failure|error:" -A 3 "$OUT/gpu_tests.txt" | head -30
fi
# build_and_bench NAME CKPT TAG FLAGS...: build-llm -v into $W/engine_NAME_TAG (wall, peak RSS, the step
# timeline to $OUT/build_NAME_TAG.txt) and bench-llm it; one JSON line to $OUT/llm.jsonl.
build_and_bench() {
  local name=$1 ck=$2 tag=$3; shift 3
  local e=$W/engine_${name}_$tag
  if [ "$(left)" -lt "${NEED_S:-90}" ]; then stamp "== $name $tag: skipped ($(left) s left)"; return; fi
  stamp "== $name $tag: build-llm $*"
  measured $OUT/build_${name}_$tag.txt timeout $(( $(left) - 15 )) "$C/kiln" build-llm "$ck" -o "$e" --device gpu --dtype fp16 --max-batch 64 \
    --max-seq-len ${KILN_LLM_MAX_SEQ:-512} --max-num-tokens 2048 -v "$@" || { tail -n 8 $OUT/build_${name}_$tag.txt; return; }
  grep -E "step graph|passes: fuse_horizontal|tuning|serialize|write|^engine|wall_s" $OUT/build_${name}_$tag.txt | tail -n 14
  stamp "== $name $tag: bench-llm"
  timeout $(( $(left) > 30 ? $(left) - 10 : 20 )) "$C/kiln" bench-llm "$e" --batch "$BATCHES" --input-len 128 --output-len 128 --cuda-graph --profile-decode --json $W/kb_${name}_$tag.json \
    > $W/kb_${name}_$tag.txt 2>&1 || tail -n 5 $W/kb_${name}_$tag.txt
  cat $W/kb_${name}_$tag.txt | cut -c1-160
  cp $W/kb_${name}_$tag.json $OUT/ 2>/dev/null
  "$PY" - "$name" "$tag" $OUT/build_${name}_$tag.txt $W/kb_${name}_$tag.json "$e" <<'PYEOF' | tee -a "$OUT/llm.jsonl"
import json, os, sys
name, tag, build, kb, e = sys.argv[1:6]
d = {"model": name, "config": tag}
try: d["build"] = json.loads(open(build).read().strip().splitlines()[-1])
except Exception as x: d["build"] = str(x)
try:
    k = json.load(open(kb)); d["kiln"] = k
    d["summary"] = {"load_ms": round(k["load_ms"]), "load_phases_ms": {p: round(v) for p, v in k.get("load_phases_ms", {}).items()},
                    **{f"b{r['batch']}": {"tpot_ms": round(r["tpot_ms_p50"], 3), "tok_s": round(r["output_tokens_per_s"]),
                                          "ttft_ms": round(r["ttft_ms_p50"], 2)} for r in k["results"]}}
except Exception as x: d["kiln"] = str(x)
d["plan_bytes"] = sum(os.path.getsize(os.path.join(e, f)) for f in os.listdir(e)) if os.path.isdir(e) else None
print(json.dumps(d.get("summary", d)), file=sys.stderr)
print(json.dumps(d))
PYEOF
}
IDS=$("$PY" -c "import random; r=random.Random(3); print(','.join(str(r.randrange(100, 50000)) for _ in range(${KILN_CALIB_TOKENS:-256})))")
if has llm1b; then
  "$PY" scripts/llm_hf_peer.py make $W --models llama1b 2>&1 | grep -v Warning | tail -1
  build_and_bench llama1b $W/llama1b fp16
  rm -rf $W/engine_llama1b_fp16
fi
if has kv1b; then
  # FP8 KV cache (--kv-cache fp8, per-layer K/V scales calibrated on the seeded ids) vs the fp16 cache, Llama-1B
  # shape: speed, and greedy tokens of 4 prompts x 32 new tokens from both engines.
  "$PY" scripts/llm_hf_peer.py make $W --models llama1b 2>&1 | grep -v Warning | tail -1
  build_and_bench llama1b $W/llama1b fp16
  build_and_bench llama1b $W/llama1b kvfp8 --kv-cache fp8 --calib-ids "$(echo $IDS | cut -d, -f1-128)" --calib-max-seq-len 128
  if [ -d $W/engine_llama1b_fp16 ] && [ -d $W/engine_llama1b_kvfp8 ]; then
    "$PY" - "$C/kiln" $W/engine_llama1b_fp16 $W/engine_llama1b_kvfp8 <<'PYEOF' | tee -a "$OUT/llm.jsonl"
import json, random, subprocess, sys
kiln, a, b = sys.argv[1:4]
r = random.Random(11)
prompts = [[r.randrange(100, 30000) for _ in range(n)] for n in (9, 24, 64, 120)]
def gen(e, p):
    out = subprocess.run([kiln, "generate", e, "--prompt-ids", ",".join(map(str, p)), "--max-new-tokens", "32",
                          "--ignore-eos", "--json", "--cuda-graph"], capture_output=True, text=True)
    return json.loads(out.stdout)["tokens"] if out.returncode == 0 else out.stderr[-300:]
res = []
for p in prompts:
    x, y = gen(a, p), gen(b, p)
    n = 0
    while isinstance(x, list) and isinstance(y, list) and n < min(len(x), len(y)) and x[n] == y[n]: n += 1
    res.append({"prompt_len": len(p), "agree": n, "of": 32 if isinstance(x, list) else str(x)})
print(json.dumps({"check": "greedy tokens, fp8 KV cache vs fp16 KV cache (llama1b)", "prompts": res}))
PYEOF
  fi
  rm -rf $W/engine_llama1b_fp16 $W/engine_llama1b_kvfp8
fi
if has llm8b || has peer8b; then
  stamp "== llama8b checkpoint"
  "$PY" scripts/llm_hf_peer.py make $W --models llama8b 2>&1 | grep -v Warning | tail -1
fi
if has llm8b; then
  "$PY" scripts/llm_hf_peer.py bound $W/llama8b | tee -a "$OUT/llm.jsonl"
  for cfg in ${KILN_LLM8B_CONFIGS:-fp16}; do
    case $cfg in
      fp16) NEED_S=150 build_and_bench llama8b $W/llama8b fp16 ;;
      fp8t) NEED_S=200 build_and_bench llama8b $W/llama8b fp8t --quant fp8 --calib-ids "$(echo $IDS | cut -d, -f1-64)" --calib-max-seq-len 64 ;;
    esac
    rm -rf $W/engine_llama8b_$cfg  # 16 GB each on a 64 GB disk
  done
fi
if has peer8b && [ "$(left)" -gt 120 ]; then
  stamp "== transformers peer (static cache + torch.compile), llama8b"
  "$PY" scripts/llm_hf_peer.py bench $W/llama8b --batch "$BATCHES" --input-len 128 --output-len 128 --compile \
    --max-seconds $(( $(left) - 30 )) --out "$OUT/llm8b_peer.json" 2>&1 | grep "^\[peer\]"
fi
stamp "done"
