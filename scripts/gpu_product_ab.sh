#!/usr/bin/env bash
# Product-path A/B on the GPU machine: the same models built and benchmarked by two Kiln builds,
# `kiln build` -> plan -> `kiln bench --cuda-graph` (GPU compute time, CUDA events, inputs on the
# device), both in one run on one card: .gpu-carry/kiln (this tree) vs .gpu-carry/base/kiln
# (another commit: scripts/gpu_carry.sh with KILN_BASE_BIN=path/to/its/kiln). Each configuration
# is benchmarked base, new, new, base so drift shows. One JSON object per line in $OUT/ab.jsonl.
#   OUT=$OUT scripts/gpu_product_ab.sh        (KILN_AB_MODELS=resnet101,vit_b_16,bert_base,gpt2)
#   KILN_AB_SEQ_BATCHES="1 32" adds BERT / GPT-2 at those batches (sequence 128), KILN_AB_VIT_BATCHES="64" ViT;
#   KILN_AB_SKIP_2x128=1 leaves out the default ViT batch 1 and BERT / GPT-2 2 x 128 configurations
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
MODELS=",${KILN_AB_MODELS:-resnet101,vit_b_16,bert_base,gpt2},"
ITERS=${KILN_AB_ITERS:-300}
AB="$OUT/ab.jsonl"
mkdir -p models /tmp/ab
[ -x $C/base/kiln ] || { echo "no $C/base/kiln: build it with KILN_BASE_BIN (scripts/gpu_carry.sh)"; exit 2; }

# one_config NAME MODEL SHAPES PREC: builds with both binaries, then benches base,new,new,base.
one_config() {
  local name=$1 model=$2 shapes=$3 prec=$4
  for v in base new; do
    local bin=$C/kiln; [ $v = base ] && bin=$C/base/kiln
    local s0; s0=$(date +%s.%N)
    if ! $bin build models/$model.onnx -o /tmp/ab/$name.$v.plan --device gpu --$prec --shapes "$shapes" \
        > /tmp/ab/$name.$v.build.txt 2>&1; then
      echo "{\"config\": \"$name\", \"variant\": \"$v\", \"error\": \"build failed\"}" | tee -a "$AB"
      tail -n 5 /tmp/ab/$name.$v.build.txt
      continue
    fi
    local s1; s1=$(date +%s.%N)
    echo "$v $(awk -v a="$s0" -v b="$s1" 'BEGIN{printf "%.2f", b-a}')" > /tmp/ab/$name.$v.build_s
  done
  for v in base new new base; do
    local bin=$C/kiln; [ $v = base ] && bin=$C/base/kiln
    [ -f /tmp/ab/$name.$v.plan ] || continue
    $bin bench /tmp/ab/$name.$v.plan --cuda-graph --iterations $ITERS --json /tmp/ab/$name.$v.json > /dev/null 2>&1 ||
      { echo "{\"config\": \"$name\", \"variant\": \"$v\", \"error\": \"bench failed\"}" | tee -a "$AB"; continue; }
    $PY - "$name" "$v" "$prec" "/tmp/ab/$name.$v.json" "/tmp/ab/$name.$v.plan" "$(cut -d' ' -f2 /tmp/ab/$name.$v.build_s)" <<'PYEOF' | tee -a "$AB"
import json, os, sys
name, v, prec, jpath, plan, build_s = sys.argv[1:7]
j = json.load(open(jpath))
print(json.dumps({"config": name, "variant": v, "precision": prec, "batch": j["throughput"]["batch"],
                  "gpu_median_ms": j["gpu_compute_ms"]["median"], "gpu_p99_ms": j["gpu_compute_ms"].get("p99"),
                  "items_per_s": round(j["throughput"]["batch"] / j["gpu_compute_ms"]["median"] * 1000.0, 1),
                  "build_s": float(build_s), "plan_bytes": os.path.getsize(plan),
                  "load_ms": round(j["plan_load_ms"], 1), "load_phases_ms": j["plan_load_phases_ms"]}))
PYEOF
  done
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/ab_gpu.txt"
if [[ "$MODELS" == *",resnet101,"* ]]; then
  [ -f models/resnet101.onnx ] || $PY scripts/export_models.py --model resnet101 -o models/resnet101.onnx \
      --photos-npz $C/calib_photos.npz 2>&1 | tail -n 1
  for prec in fp16 bf16; do
    for b in ${KILN_AB_BATCHES:-1 64 256}; do one_config r101_${prec}_b$b resnet101 input:${b}x3x224x224 $prec; done
  done
fi
if [[ "$MODELS" == *",vit_b_16,"* ]]; then
  [ -f models/vit_b_16.onnx ] || $PY scripts/export_models.py --model vit_b_16 -o models/vit_b_16.onnx 2>&1 | tail -n 1
  [ -n "${KILN_AB_SKIP_2x128:-}" ] || one_config vit_fp16_b1 vit_b_16 input:1x3x224x224 fp16
  for b in ${KILN_AB_VIT_BATCHES:-}; do one_config vit_fp16_b$b vit_b_16 input:${b}x3x224x224 fp16; done
fi
for m in bert_base gpt2; do
  [[ "$MODELS" == *",$m,"* ]] || continue
  shapes=input_ids:2x128
  [ $m = bert_base ] && shapes=$shapes,attention_mask:2x128
  [ -f models/$m.onnx ] || $PY scripts/export_models.py --model $m -o models/$m.onnx 2>&1 | tail -n 1
  [ -n "${KILN_AB_SKIP_2x128:-}" ] || one_config ${m}_fp16_2x128 $m $shapes fp16
  for b in ${KILN_AB_SEQ_BATCHES:-}; do  # more batches of sequence 128 (issue 11's table: 1 and 32)
    shapes=input_ids:${b}x128
    [ $m = bert_base ] && shapes=$shapes,attention_mask:${b}x128
    one_config ${m}_fp16_${b}x128 $m $shapes fp16
  done
done
# The new plans' tactics as inspect shows them (ids, names), one model.
[ -f /tmp/ab/r101_fp16_b1.new.plan ] && $C/kiln inspect /tmp/ab/r101_fp16_b1.new.plan > "$OUT/ab_inspect_r101_fp16_b1.txt" 2>&1
cat /tmp/ab/r101_fp16_b1.new.build.txt > "$OUT/ab_build_log.txt" 2>/dev/null
echo "== summary (median of the two benches per variant)"
$PY - "$AB" <<'PYEOF'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    if "error" in r: continue
    by[r["config"]][r["variant"]].append(r)
for cfg, vs in by.items():
    def best(v): return min(x["gpu_median_ms"] for x in vs.get(v, [])) if vs.get(v) else float("nan")
    b, n = best("base"), best("new")
    print(f"{cfg:24s} base {b:8.4f} ms  new {n:8.4f} ms  new/base {n/b:6.3f}  build_s base {vs['base'][0]['build_s'] if vs.get('base') else 'na'} new {vs['new'][0]['build_s'] if vs.get('new') else 'na'}")
PYEOF
