#!/usr/bin/env bash
# Kiln's model tests (called by scripts/test.sh): torchvision classifiers vs PyTorch, PaddleOCR's
# trained det/rec/cls models vs ONNX Runtime and the rendered truth. Needs build/kiln.
#   tests/models/run_model_tests.sh [MODEL ...] [--no-ocr] [--kiln PATH] [--device cpu|gpu|auto]
# Default models: resnet50 mobilenet_v2 efficientnet_b0 vit_b_16 (also: resnet101, convnext_tiny),
# then optimized-vs-unoptimized at fixed shapes for vit_b_16 bert_base gpt2 (--transformers LIST);
# $KILN_MODEL_TESTS overrides the default list. Exported models are cached in models/ (git-ignored).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
PY="${KILN_PYTHON:-/usr/bin/python3}"
scripts/fetch_npm_assets.sh
# shellcheck disable=SC2086  # KILN_MODEL_TESTS is a space-separated list
exec "$PY" tests/models/model_tests.py ${KILN_MODEL_TESTS:-} "$@"
