#!/usr/bin/env bash
# Builds the `kiln` Python package and installs it into Debian's python3 (README: "From Python"):
# dependencies (scripts/setup.sh), the same CMake build as scripts/test.sh, then
# `cmake --install build --component python` into /usr/local/lib/python3.11/dist-packages.
# Usage: ./scripts/install_python.sh   then   python3 -c "import kiln; print(kiln.__version__)"
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_CUDA=AUTO -DKILN_BUILD_PYTHON=ON >/dev/null
ninja -C build -j"$(nproc)" kiln_python
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO cmake --install build --component python
cd / && /usr/bin/python3 -c "import kiln; print('installed kiln', kiln.__version__, 'at', kiln.__file__)"
