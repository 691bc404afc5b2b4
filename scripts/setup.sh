#!/usr/bin/env bash
# Installs every build/test/demo dependency of Kiln from Debian packages (apt-get) and npm.
# Idempotent: skips apt-get when everything is already installed.
set -euo pipefail
PKGS=(build-essential cmake ninja-build ccache pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libopenblas-dev libzip-dev
  libicu-dev libsentencepiece-dev  # src/llm: NFC; tokenizer.model (both optional at build time)
  pybind11-dev python3-dev python3-pytest
  python3-numpy python3-onnx python3-torch python3-torchvision python3-skimage python3-pil
  fonts-dejavu-core graphviz
  clang libclang-rt-14-dev)  # clang: libFuzzer harnesses and the ASan/UBSan build (scripts/fuzz.sh, sanitize.sh)
# node + npm: the machine image ships them (nodesource); Debian's npm conflicts with that nodejs.
command -v npm >/dev/null || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
