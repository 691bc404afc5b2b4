#!/usr/bin/env bash
# Session 16's GPU checks (carry .gpu-carry from scripts/gpu_carry.sh): the RMSNorm prologue and silu
# gate epilogue of the GEMM (docs/decisions/0092) in the tests, the 8B decode profile (fp16 and fp8),
# and greedy agreement with transformers on the 1B / Qwen-0.5B shapes.
#   run(command="KILN_BUDGET_S=570 scripts/gpu_session16.sh", carry=[".gpu-carry"])
# Steps (KILN_STEPS, default 'tests llm8b greedy'): tests, llm1b, llm8b (KILN_LLM8B_CONFIGS, default
# 'fp16 fp8t'), peer8b as in scripts/gpu_session14.sh (KILN_TEST_FILTER defaults here to the skinny
# GEMM, the op table's GEMM / decoder rows and the LLM suites); greedy: scripts/gpu_llm_vs_hf.sh on
# KILN_LLM_MODELS (default llama1b,qwen05b) without its bench, while time is left.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
export T0=$(date +%s)
STEPS=${KILN_STEPS:-tests llm8b greedy}
P='OpTable/OpTableCuda.*'
export KILN_TEST_FILTER=${KILN_TEST_FILTER:-"GpuGemv*:GpuRope*:GpuPaged*:GpuLlmStep*:GpuLlmRunner*:GpuPlanLoad*:${P}Decoder*:${P}Gemm*:${P}MatMul*:${P}RMS*:${P}Transformer*:${P}QuantLinear*:GpuQdq*:LlmStepGraphFp8*"}
export KILN_TEST_MAX_S=${KILN_TEST_MAX_S:-170}
export KILN_LLM8B_CONFIGS=${KILN_LLM8B_CONFIGS:-fp16 fp8t}
LLM=$(for s in $STEPS; do case $s in tests|llm1b|kv1b|llm8b|peer8b) echo -n "$s ";; esac; done)
[ -n "$LLM" ] && KILN_STEPS="$LLM" scripts/gpu_session14.sh
. scripts/gpu_env.sh
if has greedy && [ "$(left)" -gt 60 ]; then
  stamp "== greedy vs transformers ($(left) s left)"
  KILN_LLM_MODELS=${KILN_LLM_MODELS:-llama1b,qwen05b} KILN_LLM_BENCH=0 timeout $(( $(left) - 5 )) scripts/gpu_llm_vs_hf.sh
fi
stamp "done"
