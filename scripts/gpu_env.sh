# Sourced by the GPU-machine scripts (run from the repo root there, with .gpu-carry/ from
# scripts/gpu_carry.sh): C = the carried binaries, the carried Debian .so files and the venv's
# cuDNN 9.19 on the library path (../shared/docs/GPU.md), PY = the venv's Python (torch 2.11).
C=.gpu-carry
# Carried files compressed with xz to keep the carry under 64 MiB (any .xz under .gpu-carry/) are
# decompressed in place, once, for every script that sources this file.
find $C -name '*.xz' -exec xz -d -f {} + 2>/dev/null || true
CUDNN=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
export LD_LIBRARY_PATH=$PWD/$C/lib:$CUDNN:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
