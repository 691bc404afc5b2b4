// The bulk 2-D transpose of weights at build (an LLM's are GiBs): the checkpoint's nn.Linear
// [out, in] -> the graph's MatMul [in, out] (llm/decoder_layers.cc), and a MatMul's [K, N]
// constant -> the [N, K] a 16-bit CUDA GEMM stores (backends/cuda/factory_gemm.cc, decision 0089).
#pragma once

#include <cstdint>

#include "kiln/types.h"

namespace kiln {

// dst [cols, rows] float32 (row stride `rows`) = scale · transpose(src [rows, cols]) for src in
// float32, float16 or bfloat16 (F16/BF16 converted exactly: fp16_to_float_n / bf16_to_float_n),
// in 64 × 64 tiles on every core (parallel_for). Other dtypes: false, nothing written.
bool transpose_to_float32(const void* src, DataType from, int64_t rows, int64_t cols, float scale, float* dst);

}  // namespace kiln
