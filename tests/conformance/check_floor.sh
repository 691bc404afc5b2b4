#!/usr/bin/env bash
# Runs `kiln conformance` over Debian's ONNX backend test data and fails if fewer cases pass
# than the floor in tests/conformance/floor.txt (the floor only goes up). Writes the per-case
# JSON report to build/conformance.json.
set -euo pipefail
KILN=${1:?usage: check_floor.sh path/to/kiln}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=/usr/share/libonnx-testdata/data
OUT=${2:-$(dirname "$KILN")/conformance.json}
[ -d "$DATA" ] || { echo "missing $DATA (apt-get install libonnx-testdata)"; exit 1; }
summary=$("$KILN" conformance "$DATA" --jobs 2 --json "$OUT" | tail -n 1)
echo "$summary  (report: $OUT)"
passed=$(echo "$summary" | awk '{print $1}')
floor=$(grep -v '^#' "$HERE/floor.txt" | head -n 1)
if [ "$passed" -lt "$floor" ]; then
  echo "FAIL: $passed cases passed, below the floor of $floor"
  exit 1
fi
echo "ok: $passed >= floor $floor"
