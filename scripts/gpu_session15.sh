#!/usr/bin/env bash
# Session 15's GPU checks (carry .gpu-carry from scripts/gpu_carry.sh): the generated FusedPointwise
# kernels (decision 0091) in the tests, the LLM decode profile and the transformer plans.
#   run(command="KILN_BUDGET_S=570 scripts/gpu_session15.sh", carry=[".gpu-carry"])
# Steps (KILN_STEPS, default 'tests llm1b llm8b tf'): tests, llm1b, llm8b, peer8b as in
# scripts/gpu_session14.sh (KILN_TEST_FILTER defaults here to the generated kernels, the op table's
# pointwise rows and the LLM suites); tf: scripts/gpu_transformers.sh on KILN_TF_CONFIGS (default BERT
# and GPT-2 at batch 1 and 32, with per-layer profiles; peers with KILN_TF_PEERS=1) while time is left.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
export T0=$(date +%s)
STEPS=${KILN_STEPS:-tests llm1b llm8b tf}
P='OpTable/OpTableCuda.*'
export KILN_TEST_FILTER=${KILN_TEST_FILTER:-"PwJit*:GpuPwJit*:GpuRope*:GpuPaged*:GpuLlmStep*:GpuLlmRunner*:GpuGemv*:GpuPlanLoad*:GpuTransformer*:${P}Bandwidth*:${P}FusedPointwise*:${P}Selu*:${P}Mish*:${P}Softplus*:${P}Gelu*:${P}HardSwish*:${P}Celu*:${P}Sigmoid*:${P}Erf*:${P}Mod*"}
export KILN_TEST_MAX_S=${KILN_TEST_MAX_S:-170}
LLM=$(for s in $STEPS; do case $s in tests|llm1b|kv1b|llm8b|peer8b) echo -n "$s ";; esac; done)
[ -n "$LLM" ] && KILN_STEPS="$LLM" scripts/gpu_session14.sh
. scripts/gpu_env.sh
if has tf && [ "$(left)" -gt 60 ]; then
  stamp "== transformers ($(left) s left)"
  KILN_TF_CONFIGS=${KILN_TF_CONFIGS:-bert_base:1 bert_base:32 gpt2:1 gpt2:32} KILN_TF_PEERS=${KILN_TF_PEERS:-0} KILN_TF_PROFILE=${KILN_TF_PROFILE:-1} \
    timeout $(( $(left) - 5 )) scripts/gpu_transformers.sh
fi
stamp "done"
