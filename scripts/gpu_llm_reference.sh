#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_carry.sh here, which carries kiln_llm_generate):
#   run(command="scripts/gpu_llm_reference.sh", carry=[".gpu-carry"])
# Kiln's CPU LLM generation against transformers on tiny seeded checkpoints saved there
# (scripts/llm_reference_hf.py says what is compared); the per-prompt results land in
# $OUT/llm_reference_hf.json. Extra arguments go to the script (--gpt2-124m, --llama-1b, --new-tokens N).
set -euo pipefail
cd "$(dirname "$0")/.."
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
"$PY" scripts/llm_reference_hf.py "$C/kiln_llm_generate" --json "${OUT:-.}/llm_reference_hf.json" "$@"
