#!/usr/bin/env bash
# Per-layer profiles of the FP16 transformer plans on the GPU machine (carry .gpu-carry):
# `kiln run --dump-profile` (median per layer, slowest first) of ViT-B/16 batch 64 and BERT-base
# 32 x 128; the top rows and the totals per op kind. OUT=$OUT scripts/gpu_profile_transformers.sh
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"
mkdir -p models /tmp/pf
for cfg in "vit_b_16:input:64x3x224x224" "bert_base:input_ids:32x128,attention_mask:32x128"; do
  m=${cfg%%:*}; shapes=${cfg#*:}
  [ -f models/$m.onnx ] || $PY scripts/export_models.py --model $m -o models/$m.onnx 2>&1 | tail -n 1
  $C/kiln build models/$m.onnx -o /tmp/pf/$m.plan --device gpu --fp16 --shapes "$shapes" > /dev/null 2>&1 || { echo "$m: build failed"; continue; }
  $C/kiln run /tmp/pf/$m.plan --dump-profile "$OUT/profile_$m.json" > /tmp/pf/$m.txt 2>&1
  echo "== $m"; grep -A 14 "Per-layer profile" /tmp/pf/$m.txt
  $PY - "$OUT/profile_$m.json" <<'PYEOF'
import json, sys, collections
j = json.load(open(sys.argv[1]))
layers = j["layers"] if isinstance(j, dict) else j
by = collections.Counter()
for l in layers: by[(l.get("op"), l.get("tactic", "").split(" ")[0])] += l.get("median_ms", 0)
tot = sum(by.values())
for (op, t), ms in by.most_common(12): print(f"  {op:18s} {t:24s} {ms:8.3f} ms {100*ms/tot:5.1f}%")
PYEOF
done
