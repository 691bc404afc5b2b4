#!/usr/bin/env bash
# Prepares .gpu-carry/ (git-ignored) for the GPU machine, which has no Debian protobuf/onnx/
# OpenBLAS (see ../shared/docs/GPU.md): builds Kiln here with CUDA for sm_90 (H100/H200) and
# copies the binaries plus the Debian shared libraries they need, and the `kiln` Python package
# built for Python 3.12 (the venv there). Then, with the device tool:
#   run(command="scripts/gpu_session.sh", carry=[".gpu-carry"])
#   run(command="scripts/gpu_python.sh", carry=[".gpu-carry"])
#   run(command="scripts/gpu_llm_reference.sh", carry=[".gpu-carry"])   # LLM generation vs transformers
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
# The Python package for the GPU machine's venv (Python 3.12): the same build dir, configured with
# a 3.12 interpreter (pyenv's 3.12.1 here: its headers; the module's ABI is 3.12's).
PY312=${KILN_PY312:-/root/.pyenv/versions/3.12.1/bin/python3.12}
PYARGS=(); PYTARGET=()
if [ -x "$PY312" ]; then PYARGS=(-DKILN_BUILD_PYTHON=ON -DPython_EXECUTABLE="$PY312"); PYTARGET=(kiln_python); fi
# ICU and SentencePiece (src/llm: NFC, tokenizer.model) off: no need to carry libicu (33 MB) and
# libsentencepiece to the GPU machine, which has no Debian libraries.
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKILN_WITH_ICU=OFF -DKILN_WITH_SENTENCEPIECE=OFF "${PYARGS[@]}" >/dev/null
ninja -C build-cuda kiln_cli kiln_tests kiln_gpu_bench kiln_llm_inspect kiln_llm_generate "${PYTARGET[@]}"
rm -rf .gpu-carry && mkdir -p .gpu-carry/lib
cp build-cuda/kiln build-cuda/kiln_tests build-cuda/kiln_gpu_bench build-cuda/kiln_llm_inspect build-cuda/kiln_llm_generate .gpu-carry/
strip .gpu-carry/kiln .gpu-carry/kiln_tests .gpu-carry/kiln_gpu_bench .gpu-carry/kiln_llm_inspect .gpu-carry/kiln_llm_generate
if [ ${#PYTARGET[@]} -gt 0 ]; then  # `import kiln` there: PYTHONPATH=.gpu-carry/python (scripts/gpu_python.sh)
  mkdir -p .gpu-carry/python && cp -r build-cuda/python/kiln .gpu-carry/python/
  strip --strip-unneeded .gpu-carry/python/kiln/_kiln*.so
fi
for lib in libprotobuf.so.32 libonnx_proto.so.1 libonnx.so.1 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libfmt.so.9 libzip.so.4 libbz2.so.1.0; do
  cp -L "/lib/x86_64-linux-gnu/$lib" .gpu-carry/lib/ 2>/dev/null || cp -L "/usr/lib/x86_64-linux-gnu/$lib" .gpu-carry/lib/
done
# KILN_BASE_BIN=path/to/kiln: another commit's kiln, for scripts/gpu_product_ab.sh's A/B.
if [ -n "${KILN_BASE_BIN:-}" ]; then
  mkdir -p .gpu-carry/base && cp "$KILN_BASE_BIN" .gpu-carry/base/kiln && strip .gpu-carry/base/kiln
fi
# The OCR model, its key file and the rendered test / calibration inputs (the GPU machine has no
# fonts or node): scripts/gpu_quant.sh runs it there in FP32/FP16 and INT8.
if [ -f .cache/ocr/package/assets/ch_PP-OCRv4_rec_infer.onnx ]; then
  mkdir -p .gpu-carry/ocr
  cp .cache/ocr/package/assets/ch_PP-OCRv4_rec_infer.onnx .cache/ocr/package/assets/ppocr_keys_v1.txt .gpu-carry/ocr/
  /usr/bin/python3 scripts/ocr_demo.py --save-inputs .gpu-carry/ocr > /dev/null
fi
# skimage's calibration photos, so the GPU machine exports the same BatchNorm-calibrated model.
/usr/bin/python3 scripts/export_models.py --save-photos-npz .gpu-carry/calib_photos.npz
du -sh .gpu-carry
