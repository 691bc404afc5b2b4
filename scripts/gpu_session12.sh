#!/usr/bin/env bash
# Session 12's GPU checks (carry .gpu-carry from scripts/gpu_carry.sh):
#   run(command="KILN_STEPS='tests bert llm8b' scripts/gpu_session12.sh", carry=[".gpu-carry"])
# Steps (KILN_STEPS):
#   tests   kiln_tests on KILN_TEST_FILTER (default: the FP8 / QuantLinear / LLM step tests and op-table rows)
#   bert    BERT-base (scripts/export_models.py) batch 32 x 128: FP16 vs FP8 with per-channel and per-tensor
#           weight scales (--weight-scales, decision 0085) vs INT8; kiln bench --cuda-graph, cosine vs FP16
#           -> $OUT/bert_quant.jsonl
#   llm     GPT-2 124M and the Llama-1B shape (KILN_LLM_SMALL): fp16 vs --quant fp8 (per-tensor, the default)
#           vs --quant fp8 --weight-scales per-channel; bench-llm --cuda-graph at KILN_LLM_BATCHES (1,64)
#           -> $OUT/llm_fp8.jsonl
#   llm8b   the Llama-3.1-8B shape (scripts/llm_hf_peer.py make llama8b: transformers' init on the GPU, fp16,
#           16 GB): build-llm fp16 and fp8 (build wall time and peak host RSS), bench-llm (load time, TTFT,
#           TPOT, tokens/s, peak device memory) at KILN_LLM_BATCHES -> $OUT/llm8b.jsonl; the copy-bandwidth
#           bound of a decode step (weight bytes / measured device copy rate) beside it
#   peer8b  transformers static cache + torch.compile on the same 8B checkpoint and shapes -> $OUT/llm8b_peer.json
# Files under /tmp/llm stay while the machine is warm, so a later call reuses the checkpoint and engines.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
STEPS=${KILN_STEPS:-tests bert llm}
BATCHES=${KILN_LLM_BATCHES:-1,64}
W=/tmp/llm; mkdir -p $W
# Seconds left of the call's budget (KILN_BUDGET_S, default 560 of the device tool's 600); a step that needs
# more than what is left is skipped, so what ran still comes back.
left() { echo $(( ${KILN_BUDGET_S:-560} - ($(date +%s) - T0) )); }
# A command's wall seconds and peak resident set (its children's ru_maxrss), as JSON on the last line of $2.
last_json() { tail -n 1 "$1"; }
if has tests; then
  stamp "== GPU tests"
  F=${KILN_TEST_FILTER:-'GpuLlmStep*:LlmStepGraphFp8*:OpTable/OpTableCuda.*QuantLinear*:GpuQdq*:Quantize.*'}
  $C/kiln_tests --gtest_filter="$F" > "$OUT/gpu_tests.txt" 2>&1
  echo "rc=$?" >> "$OUT/gpu_tests.txt"
  grep -E "^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|tests ran|rc=" "$OUT/gpu_tests.txt" | head -30
  grep -E "Failure|error:" -A 3 "$OUT/gpu_tests.txt" | head -40
  grep -E "^\[fp8 per-tensor\]" "$OUT/gpu_tests.txt" | sort | uniq -c | head -12
fi
# build_and_bench NAME CKPT TAG FLAGS...: build-llm into $W/engine_NAME_TAG (wall, peak RSS) and bench-llm it;
# one JSON line to $OUT/$JSONL.
build_and_bench() {
  local name=$1 ck=$2 tag=$3; shift 3
  local e=$W/engine_${name}_$tag
  if [ "$(left)" -lt "${NEED_S:-90}" ]; then stamp "== $name $tag: skipped ($(left) s left)"; return; fi
  stamp "== $name $tag: build-llm $*"
  if [ ! -f $e/kiln_llm.json ]; then
    measured $W/build_${name}_$tag.txt timeout $(( $(left) - 15 )) "$C/kiln" build-llm "$ck" -o "$e" --device gpu --dtype fp16 --max-batch 64 \
      --max-seq-len ${KILN_LLM_MAX_SEQ:-512} --max-num-tokens 2048 "$@" || { tail -n 8 $W/build_${name}_$tag.txt; return; }
  fi
  grep -vE "^\s*$" $W/build_${name}_$tag.txt | tail -n 3
  stamp "== $name $tag: bench-llm"
  timeout $(( $(left) > 30 ? $(left) - 10 : 20 )) "$C/kiln" bench-llm "$e" --batch "$BATCHES" --input-len 128 --output-len 128 --cuda-graph --json $W/kb_${name}_$tag.json \
    > $W/kb_${name}_$tag.txt 2>&1 || tail -n 5 $W/kb_${name}_$tag.txt
  tail -n 4 $W/kb_${name}_$tag.txt
  "$PY" - "$name" "$tag" $W/build_${name}_$tag.txt $W/kb_${name}_$tag.json "$e" <<'PYEOF' >> "$OUT/$JSONL"
import json, os, sys
name, tag, build, kb, e = sys.argv[1:6]
d = {"model": name, "config": tag}
try: d["build"] = json.loads(open(build).read().strip().splitlines()[-1])
except Exception as x: d["build"] = str(x)
try: d["kiln"] = json.load(open(kb))
except Exception as x: d["kiln"] = str(x)
d["plan_bytes"] = sum(os.path.getsize(os.path.join(e, f)) for f in os.listdir(e)) if os.path.isdir(e) else None
print(json.dumps(d))
PYEOF
}
IDS=$("$PY" -c "import random; r=random.Random(3); print(','.join(str(r.randrange(100, 50000)) for _ in range(${KILN_CALIB_TOKENS:-256})))")
if has llm; then
  : > "$OUT/llm_fp8.jsonl"; JSONL=llm_fp8.jsonl
  SMALL=${KILN_LLM_SMALL:-llama1b,gpt2}
  "$PY" scripts/llm_hf_peer.py make $W --models "$SMALL" 2>&1 | grep -v Warning | tail -3
  for m in ${SMALL//,/ }; do
    build_and_bench $m $W/$m fp16
    build_and_bench $m $W/$m fp8t --quant fp8 --calib-ids "$IDS"
    build_and_bench $m $W/$m fp8c --quant fp8 --calib-ids "$IDS" --weight-scales per-channel
    "$C/kiln" inspect $W/engine_${m}_fp8t/model.plan 2>/dev/null | grep -oE "quant_linear [a-z0-9]+ [a-z.]+( fused-scale)? " | sort | uniq -c
  done
fi
if has llm8b; then
  JSONL=llm8b.jsonl; [ -f "$OUT/$JSONL" ] || : > "$OUT/$JSONL"
  stamp "== llama8b checkpoint"
  nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
  "$PY" scripts/llm_hf_peer.py make $W --models llama8b 2>&1 | grep -v Warning | tail -3
  du -sh $W/llama8b
  # The decode bound: a step reads every weight once; the device's copy rate from a 4 GiB D2D copy.
  "$PY" scripts/llm_hf_peer.py bound $W/llama8b | tee -a "$OUT/$JSONL"
  for cfg in ${KILN_LLM8B_CONFIGS:-fp16 fp8t}; do
    case $cfg in
      fp16) NEED_S=240 build_and_bench llama8b $W/llama8b fp16 ;;
      fp8t) NEED_S=240 build_and_bench llama8b $W/llama8b fp8t --quant fp8 --calib-ids "$(echo $IDS | cut -d, -f1-64)" --calib-max-seq-len 64 ;;
    esac
    rm -rf $W/engine_llama8b_$cfg  # 16 GB each on a 64 GB disk
  done
fi
if has bert && [ "$(left)" -gt 150 ]; then
  stamp "== BERT-base FP8 per-tensor / per-channel, INT8 vs FP16"
  mkdir -p models /tmp/qb
  [ -f models/bert_base.onnx ] || $PY scripts/export_models.py --model bert_base -o models/bert_base.onnx 2>&1 | tail -n 1
  $PY -c "
import numpy as np; r = np.random.default_rng(0)
np.savez('/tmp/qb/calib.npz', input_ids=r.integers(0, 30522, (32, 128)).astype(np.int64), attention_mask=np.ones((32, 128), np.int64))
np.save('/tmp/qb/ids.npy', r.integers(0, 30522, (32, 128)).astype(np.int64)); np.save('/tmp/qb/mask.npy', np.ones((32, 128), np.int64))"
  : > "$OUT/bert_quant.jsonl"
  for cfg in "fp16:--fp16" "fp8_channel:--fp16 --fp8 --calib /tmp/qb/calib.npz" \
             "fp8_tensor:--fp16 --fp8 --calib /tmp/qb/calib.npz --weight-scales per-tensor" \
             "int8:--fp16 --int8 --calib /tmp/qb/calib.npz"; do
    tag=bert_${cfg%%:*}; flags=${cfg#*:}
    if ! $C/kiln build models/bert_base.onnx -o /tmp/qb/$tag.plan --device gpu $flags --shapes input_ids:32x128,attention_mask:32x128 \
        > /tmp/qb/$tag.build.txt 2>&1; then echo "$tag build failed"; tail -n 5 /tmp/qb/$tag.build.txt; continue; fi
    grep -E "quantization:" /tmp/qb/$tag.build.txt | sed "s/^/$tag /"
    $C/kiln inspect /tmp/qb/$tag.plan 2>/dev/null | grep -oE "quant_linear [a-z0-9]+ [a-z.]+( fused-scale)? " | sort | uniq -c
    $C/kiln bench /tmp/qb/$tag.plan --cuda-graph --iterations 200 --json /tmp/qb/$tag.json --dump-profile /tmp/qb/prof_$tag.json > /dev/null 2>&1
    $C/kiln run /tmp/qb/$tag.plan --input input_ids=/tmp/qb/ids.npy --input attention_mask=/tmp/qb/mask.npy --output-dir /tmp/qb/out_$tag > /dev/null 2>&1
    $PY - "$tag" /tmp/qb/$tag.json <<'PYEOF' | tee -a "$OUT/bert_quant.jsonl"
import glob, json, sys, numpy as np
tag, jp = sys.argv[1:3]
ms = json.load(open(jp))["gpu_compute_ms"]["median"]
d = {"config": tag, "batch": 32, "seq": 128, "gpu_median_ms": ms}
ref, got = glob.glob("/tmp/qb/out_bert_fp16/*.npy"), glob.glob(f"/tmp/qb/out_{tag}/*.npy")
if ref and got:
    y, r = np.load(sorted(got)[0]).astype(np.float64), np.load(sorted(ref)[0]).astype(np.float64)
    d["cosine_vs_fp16"] = round(float((y * r).sum() / np.linalg.norm(y) / np.linalg.norm(r)), 6)
print(json.dumps(d))
PYEOF
  done
  cp /tmp/qb/prof_*.json "$OUT/" 2>/dev/null
fi
if has peer8b; then
  stamp "== transformers peer (static cache + torch.compile), llama8b"
  "$PY" scripts/llm_hf_peer.py bench $W/llama8b --batch "$BATCHES" --input-len 128 --output-len 128 --compile \
    --max-seconds ${KILN_LLM_PEER_SECONDS:-240} --out "$OUT/llm8b_peer.json" 2>&1 | grep "^\[peer\]"
fi
stamp "done"
