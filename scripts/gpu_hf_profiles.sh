#!/usr/bin/env bash
# Per-layer profiles of the transformers exports on the GPU machine (carry .gpu-carry):
#   run(command="KILN_PROFILE_MODELS=gpt2,bert scripts/gpu_hf_profiles.sh", carry=[".gpu-carry"])
# Each model (TorchScript exporter, scripts/export_hf.py --export-only) is built with
# `kiln build --device gpu --fp16` at batch KILN_PROFILE_BATCH (default 32) x 128 (ViT: 224 x 224) and
# run with `kiln run --cuda-graph --dump-profile` (CUDA-event medians per layer, layers timed one by
# one) -> $OUT/profile_hf_<model>_b<batch>.json, and a per-op summary with the slowest layers ->
# $OUT/profile_hf_summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
W=/tmp/hfprof; mkdir -p $W
B=${KILN_PROFILE_BATCH:-32}
for m in $(echo "${KILN_PROFILE_MODELS:-gpt2,bert,vit}" | tr , ' '); do
  "$PY" scripts/export_hf.py none --models "$m" --exporters torchscript --export-only --out $W/hf > /dev/null 2>&1
  onnx=$W/hf/$m/$m.torchscript.onnx
  if [ "$m" = vit ]; then shapes="pixel_values:${B}x3x224x224"; else shapes="input_ids:${B}x128,attention_mask:${B}x128"; fi
  "$C/kiln" build "$onnx" -o $W/$m.plan --device gpu --fp16 --tuning-shapes 0 --shapes "$shapes" > $W/$m.build.txt 2>&1 ||
    { echo "$m: build failed"; tail -5 $W/$m.build.txt; continue; }
  "$C/kiln" run $W/$m.plan --cuda-graph --dump-profile "$OUT/profile_hf_${m}_b$B.json" > $W/$m.run.txt 2>&1 ||
    { echo "$m: run failed"; tail -5 $W/$m.run.txt; }
done
"$PY" - "$OUT"/profile_hf_*_b$B.json <<'PYEOF' | tee "$OUT/profile_hf_summary.txt"
import collections, json, sys
for f in sys.argv[1:]:
    L = json.load(open(f))["layers"]
    agg = collections.defaultdict(lambda: [0, 0.0])
    for l in L:
        agg[l.get("op", "?")][0] += 1; agg[l.get("op", "?")][1] += l["median_ms"]
    tot = sum(v[1] for v in agg.values())
    print(f"{f.split('/')[-1]}: {len(L)} layers, {tot:.3f} ms summed")
    for k, v in sorted(agg.items(), key=lambda x: -x[1][1])[:12]:
        print(f"  {k:22s} {v[0]:4d} layers {v[1]:.4f} ms ({100 * v[1] / tot:.1f}%)")
    for l in sorted(L, key=lambda l: -l["median_ms"])[:8]:
        print(f"    {l['median_ms']:.4f} ms  {l.get('op')}  {l.get('name')}  {l.get('tactic')}")
PYEOF
