#!/usr/bin/env bash
# The per-module include roots (cmake/KilnModules.cmake) are the layering check; a quoted
# include that climbs out of the file's directory ("../") or names src/ would step around them.
# Fails listing every such line in src/, include/, tools/, tests/, bench/ and examples/, and
# any ir:: in the public headers.
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
# The public API names no internal type (the ir:: graph stays behind internal headers).
ir_refs=$(grep -rn 'ir::' include/kiln || true)
if [ -n "$ir_refs" ]; then
  echo "FAIL: include/kiln/ names ir:: types:"
  echo "$ir_refs"
  exit 1
fi
echo "ok: no ../ or src/ includes, no ir:: in include/kiln/"
