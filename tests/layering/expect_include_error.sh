#!/usr/bin/env bash
# Builds a probe target that includes a header of a module it does not link and passes only
# when that fails for the right reason: the compiler cannot find the header (so the layering is
# enforced by the include roots), not some other error.
# Usage: expect_include_error.sh BUILD_DIR TARGET HEADER
set -uo pipefail
BUILD=${1:?usage: expect_include_error.sh BUILD_DIR TARGET HEADER}
TARGET=${2:?}
HEADER=${3:?}
out=$(cmake --build "$BUILD" --target "$TARGET" 2>&1)
rc=$?
if [ "$rc" -eq 0 ]; then
  echo "FAIL: $TARGET compiled: '$HEADER' is reachable from a module that does not link it"
  exit 1
fi
# gcc: "HEADER: No such file or directory"; clang (the sanitizer build): "'HEADER' file not found".
if ! grep -q -e "$HEADER: No such file or directory" -e "'$HEADER' file not found" <<<"$out"; then
  echo "FAIL: $TARGET failed, but not because '$HEADER' was not found:"
  echo "$out" | tail -n 20
  exit 1
fi
echo "ok: $TARGET cannot include $HEADER"
