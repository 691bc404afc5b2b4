#!/usr/bin/env bash
# ONNX's backend test data on the GPU machine: `kiln conformance DATA` on the CPU reference and
# with --device gpu (CUDA plans, FP32 without TF32), the same data, one run. Prints how many of
# the cases that pass on the CPU pass on the GPU, and names every case that runs on the GPU but
# gives another answer (those are bugs; skips are unsupported layers, named in the JSON).
#   OUT=$OUT scripts/gpu_conformance.sh [DATA]     (default: the venv's onnx/backend/test/data)
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
DATA=${1:-$($PY -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))")}
JOBS=${KILN_CONFORMANCE_JOBS:-8}
$C/kiln conformance "$DATA" --jobs "$JOBS" --json "$OUT/conformance_cpu.json" 2>/dev/null | tail -n 1 | sed 's/^/cpu: /'
$C/kiln conformance "$DATA" --device gpu --jobs "$JOBS" --json "$OUT/conformance_gpu.json" 2>/dev/null | tail -n 1 | sed 's/^/gpu: /'
$PY - "$OUT/conformance_cpu.json" "$OUT/conformance_gpu.json" <<'PYEOF' | tee "$OUT/conformance_summary.txt"
import json, sys, collections
def load(p):
    j = json.load(open(p))
    cases = j["cases"] if isinstance(j, dict) else j
    return {c["name"]: c for c in cases}
cpu, gpu = load(sys.argv[1]), load(sys.argv[2])
cpu_pass = [n for n, c in cpu.items() if c["verdict"] == "pass"]
both = [n for n in cpu_pass if gpu.get(n, {}).get("verdict") == "pass"]
wrong = [n for n in cpu_pass if gpu.get(n, {}).get("verdict") == "fail"]
skipped = [n for n in cpu_pass if gpu.get(n, {}).get("verdict") == "skip"]
print(f"cases passing on the CPU: {len(cpu_pass)}; also on the GPU: {len(both)} ({100.0 * len(both) / max(len(cpu_pass), 1):.1f}%); "
      f"skipped on the GPU (unsupported): {len(skipped)}; failing on the GPU: {len(wrong)}")
for n in wrong:
    print("GPU FAIL", n, gpu[n].get("reason", "")[:240].replace("\n", " "))
reasons = collections.Counter()
for n in skipped:
    r = gpu[n].get("reason", "")
    reasons[r.split("\n")[1].strip()[:90] if "\n" in r else r[:90]] += 1
for r, k in reasons.most_common(15):
    print(f"skip x{k}: {r}")
PYEOF
