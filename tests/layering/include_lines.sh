#!/usr/bin/env bash
# The per-module include roots (cmake/KilnModules.cmake) are the layering check; a quoted
# include that climbs out of the file's directory ("../") or names src/ would step around them.
# Fails listing every such line in src/, include/, tools/, tests/, bench/ and examples/.
set -euo pipefail
ROOT=${1:?usage: include_lines.sh SOURCE_DIR}
cd "$ROOT"
bad=$(grep -rnE '^\s*#\s*include\s*"(\.\./|src/)' src include tools tests bench examples \
        --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' || true)
if [ -n "$bad" ]; then
  echo "FAIL: includes that bypass the module include roots:"
  echo "$bad"
  exit 1
fi
echo "ok: no ../ or src/ includes"
