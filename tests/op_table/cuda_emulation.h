// Host emulation of the CUDA path's build-time plans (CUDA builds only): see cuda_emulation.cc.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/gpu_transformer.h"

namespace kiln::testing::op_table {

// The outputs of single-node graph `g` on float32 input `x`, computed from the descriptors
// gpu_ops.cc plans (Transpose, Slice, Expand, Split, Gather with constant indices, Reduce*,
// Pad, Resize). Unsupported for other ops or graphs of more than one node.
StatusOr<std::vector<Tensor>> emulate_single_op(const ir::Graph& g, const cuda::ValueShapes& vs, const Tensor& x);

// The strided copy `d` describes (the kernel of Transpose / Slice / Expand layers and of the
// Attention layer's head_layout "bshd" copies) applied to float32 `x`: a tensor of d's out_dims.
Tensor emulate_strided_copy(const cuda::StridedDesc& d, const Tensor& x);

// The Attention layer as planned: per chunk of units, S = scale Q Kᵀ for each unit's
// M = group·Sq rows, the softmax rows through the kernels' index helpers, O = P V. Inputs are
// float32; a bool mask is given as 0/1 floats (as the lowering uploads it).
std::vector<Tensor> emulate_attention(const cuda::AttentionPlan& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor* mask, const Shape& out_shape);

}  // namespace kiln::testing::op_table
