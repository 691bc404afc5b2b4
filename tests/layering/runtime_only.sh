#!/usr/bin/env bash
# The runtime-only library (kiln_runtime, docs/decisions/0030-module-targets.md) loads and runs
# plans without protobuf or libonnx: kiln_run_plan links it alone. Checks that the binary needs
# neither library (ELF NEEDED entries) and that it computes what `kiln run` computes, bit for
# bit, on a plan the full `kiln build` made (CPU target; the same reference kernels).
# Usage: runtime_only.sh path/to/kiln path/to/kiln_run_plan
set -euo pipefail
KILN=${1:?usage: runtime_only.sh KILN KILN_RUN_PLAN}
RUN_PLAN=${2:?usage: runtime_only.sh KILN KILN_RUN_PLAN}
MODEL=/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx
[ -f "$MODEL" ] || { echo "missing $MODEL (apt-get install libonnx-testdata)"; exit 1; }

needed=$(readelf -d "$RUN_PLAN" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
echo "kiln_run_plan needs: $(echo $needed)"
if echo "$needed" | grep -Eiq 'protobuf|onnx'; then
  echo "FAIL: the runtime-only binary links protobuf or libonnx"
  exit 1
fi
# The full CLI does link them (so the check above would see them if they leaked in).
readelf -d "$KILN" | grep -q 'libprotobuf' || { echo "FAIL: expected the kiln CLI to need libprotobuf"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$KILN" build "$MODEL" -o "$work/conv.plan" --device cpu >/dev/null
mkdir -p "$work/rt" "$work/ref"
listing=$("$RUN_PLAN" "$work/conv.plan" "$work/rt")
echo "$listing"
args=()
while read -r kind k name; do
  [ "$kind" = input ] && args+=(--input "$name=$work/rt/in$k.npy")
done <<<"$listing"
"$KILN" run "$work/conv.plan" "${args[@]}" --output-dir "$work/ref" >/dev/null
outputs=0
while read -r kind k name; do
  [ "$kind" = output ] || continue
  cmp "$work/rt/out$k.npy" "$work/ref/$name.npy"
  outputs=$((outputs + 1))
done <<<"$listing"
[ "$outputs" -gt 0 ] || { echo "FAIL: no outputs"; exit 1; }
echo "ok: $outputs output(s) equal to kiln run's, no protobuf/libonnx"
