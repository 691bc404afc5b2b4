#!/usr/bin/env bash
# Transformers on the GPU machine (issue 11; carry .gpu-carry from scripts/gpu_carry.sh): one call,
# one card. 1) correctness of the FP16 plans on real exports: `kiln compare` against the CPU reference
# (BERT-base, GPT-2 at 4 x 128, ViT-B/16 at batch 4); 2) Kiln speed: `kiln build --fp16` ->
# `kiln bench --cuda-graph` (GPU compute median) at batch 1 and 32 (ViT: 1 and 64); 3) the PyTorch
# peers on the same modules (bench/peers/transformer_peers.py: eager in a CUDA graph, torch.compile
# reduce-overhead). Results: $OUT/transformers.jsonl. KILN_TF_CONFIGS (model:batch list) picks the speed
# runs, KILN_TF_PEERS=0 skips the peers, KILN_TF_PROFILE=1 keeps each plan's per-layer profile
# (`kiln bench --dump-profile`) in $OUT/profile_MODEL.BATCH.json.
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
mkdir -p models /tmp/tf
for m in bert_base gpt2 vit_b_16; do
  [ -f models/$m.onnx ] || $PY scripts/export_models.py --model $m -o models/$m.onnx 2>&1 | tail -n 1
done
shapes() {  # model batch
  case $1 in
    bert_base) echo "input_ids:$2x128,attention_mask:$2x128" ;;
    gpt2) echo "input_ids:$2x128" ;;
    vit_b_16) echo "input:$2x3x224x224" ;;
  esac
}
echo "== correctness: FP16 plans vs the CPU reference"
for m in bert_base gpt2 vit_b_16; do
  $C/kiln build models/$m.onnx -o /tmp/tf/$m.b4.plan --device gpu --fp16 --shapes "$(shapes $m 4)" > /dev/null 2>&1 || { echo "$m: build failed"; continue; }
  echo "-- $m batch 4"
  $C/kiln compare /tmp/tf/$m.b4.plan models/$m.onnx --atol 0.05 --rtol 0.05 2>&1 | tail -n 3
done
echo "== Kiln FP16 (kiln bench --cuda-graph)"
: > "$OUT/transformers.jsonl"
CONFIGS=${KILN_TF_CONFIGS:-bert_base:1 bert_base:32 gpt2:1 gpt2:32 vit_b_16:1 vit_b_16:64}
for cfg in $CONFIGS; do
  m=${cfg%:*}; b=${cfg#*:}
  $C/kiln build models/$m.onnx -o /tmp/tf/$m.$b.plan --device gpu --fp16 --shapes "$(shapes $m $b)" > /dev/null 2>&1 || { echo "$cfg: build failed"; continue; }
  $C/kiln bench /tmp/tf/$m.$b.plan --cuda-graph --iterations 200 --json /tmp/tf/$m.$b.json > /dev/null 2>&1 || { echo "$cfg: bench failed"; continue; }
  if [ "${KILN_TF_PROFILE:-0}" = 1 ]; then
    $C/kiln bench /tmp/tf/$m.$b.plan --iterations 20 --dump-profile $OUT/profile_$m.$b.json > /dev/null 2>&1 || echo "$cfg: profile failed"
  fi
  $PY -c "
import json; j = json.load(open('/tmp/tf/$m.$b.json')); ms = j['gpu_compute_ms']['median']
print(json.dumps({'model': '$m', 'batch': $b, 'seq': 128, 'peer': 'kiln', 'gpu_median_ms': ms, 'items_per_s': round($b / ms * 1000.0, 1)}))" | tee -a "$OUT/transformers.jsonl"
done
[ "${KILN_TF_PEERS:-1}" = 0 ] && exit 0
echo "== PyTorch peers"
timeout ${KILN_PEER_TIMEOUT:-300} $PY bench/peers/transformer_peers.py --configs "$(echo $CONFIGS | tr " " ",")" \
  ${KILN_PEER_COMPILE:---compile} 2>/dev/null | grep '^{' | tee -a "$OUT/transformers.jsonl"
