// BatchNormalization (inference mode), InstanceNormalization, LRN and MeanVarianceNormalization
// on row-major tensors through Kiln's kernels (kernels_nn.h), float accumulation in every storage
// type, with the CPU reference's semantics (backends/cpu/ops_nn_norm.cc; ONNX Operators.md):
//   BatchNormalization: y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c]; in training
//     mode (opset 14 training_mode = 1, or an earlier opset asking for the running statistics,
//     is_test aside) mean / var are the batch's (biased) per-channel statistics and the running
//     statistics (in * momentum + batch * (1 - momentum)) and, before opset 14, the batch ones are
//     written too; opset < 9 spatial = 0 is refused.
//   InstanceNormalization: per (n, c) over the spatial dims, / sqrt(var + epsilon) * scale[c] + B[c].
//   MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]).
//   LRN: x / (bias + alpha / size * sum of squares over the channel window)^beta.
// Scale / bias / statistics may be constants or activations (each [C] in the layer's storage).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_nn.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

// The operands `idx` of n row-major; each must hold `count` values.
Status channel_operands(LowerContext& ctx, const ir::Node& n, std::initializer_list<size_t> idx, int64_t count,
                        const std::string& where, std::vector<int>* ins) {
  for (size_t k : idx) {
    if (k >= n.inputs.size() || n.inputs[k] == ir::kNoValue)
      return invalid_argument(where + "input " + std::to_string(k) + " is required");
    if (shape_numel(ctx.shape(n.inputs[k])) != count)
      return invalid_argument(where + "input " + std::to_string(k) + " " + shape_str(ctx.shape(n.inputs[k])) + " has " +
                              std::to_string(shape_numel(ctx.shape(n.inputs[k]))) + " values, expected " +
                              std::to_string(count));
    KILN_ASSIGN_OR_RETURN(int v, ctx.row_major_operand(n.inputs[k]));
    ins->push_back(v);
  }
  return Status::Ok();
}

}  // namespace

Status lower_nn_norm(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs[0]);
  const StorageType t = ctx.storage();
  const int rank = static_cast<int>(x.size());
  std::vector<int> ins;
  KILN_ASSIGN_OR_RETURN(int xa, ctx.row_major_operand(n.inputs[0]));
  ins.push_back(xa);
  const int64_t nb = rank > 0 ? x[0] : 1, c = rank > 1 ? x[1] : 1;
  const int64_t inner = nb * c > 0 ? shape_numel(x) / (nb * c) : 0;
  std::unique_ptr<Layer> layer;
  if (n.op == ir::OpKind::kBatchNormalization) {
    if (rank < 2) return invalid_argument(where + "X rank " + std::to_string(rank) + ", expected at least 2");
    bool training = n.opset >= 14 ? n.attr_int("training_mode", 0) != 0
                                  : n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue;
    if (n.opset < 7 && n.attr_int("is_test", 0) != 0) training = false;
    if (n.opset < 9 && n.attr_int("spatial", 1) == 0) return unsupported(where + "spatial = 0 (per-element parameters)");
    KILN_RETURN_IF_ERROR(channel_operands(ctx, n, {1, 2, 3, 4}, c, where, &ins));
    const float eps = n.attr_float("epsilon", 1e-5f);
    if (training) {
      // Batch statistics per channel over N and the spatial dims (the normalization kernel with
      // one group per channel), and the running / saved statistics it writes beside Y.
      NormAxesDesc d;
      d.keep_rank = 1;
      d.keep_dims[0] = c;
      d.keep_strides[0] = inner;
      d.red_rank = 2;
      d.red_dims[0] = nb;
      d.red_strides[0] = c * inner;
      d.red_dims[1] = inner;
      d.red_strides[1] = 1;
      d.groups = c;
      d.group_size = nb * inner;
      d.channels = c;
      d.eps_inside_sqrt = true;
      const float momentum = n.attr_float("momentum", 0.9f);
      std::vector<int> outs = {ctx.new_output(n)};
      std::vector<int> stat_slot;  // per output k >= 1: its index in outs, or -1
      const size_t max_outs = n.opset >= 14 ? 3 : 5;
      if (n.outputs.size() > max_outs) return invalid_argument(where + "too many outputs for opset " + std::to_string(n.opset));
      for (size_t k = 1; k < 5; ++k) {
        if (k < n.outputs.size() && n.outputs[k] != ir::kNoValue) {
          if (shape_numel(ctx.shape(n.outputs[k])) != c)
            return invalid_argument(where + "output " + std::to_string(k) + " " + shape_str(ctx.shape(n.outputs[k])) +
                                    ", expected " + std::to_string(c) + " values");
          stat_slot.push_back(static_cast<int>(outs.size()));
          outs.push_back(ctx.new_output(n, k));
        } else {
          stat_slot.push_back(-1);
        }
      }
      layer = make_kernel_layer("BatchNormalization", std::string("kiln.batch_norm_training ") + storage_name(t),
                                [=](ExecState& s, const Layer& l) {
                                  NormStats st;
                                  st.mean_in = s.ptr(l.ins[3]);
                                  st.var_in = s.ptr(l.ins[4]);
                                  st.momentum = momentum;
                                  void** dst[4] = {&st.running_mean, &st.running_var, &st.batch_mean, &st.batch_var};
                                  for (int k = 0; k < 4; ++k)
                                    if (stat_slot[k] >= 0) *dst[k] = s.ptr(l.outs[stat_slot[k]]);
                                  return launch_norm_axes(s.ptr(l.ins[0]), s.ptr(l.ins[1]), s.ptr(l.ins[2]),
                                                          s.ptr(l.outs[0]), t, d, eps, s.stream, st);
                                });
      ctx.add_layer(std::move(layer), n.name, ins, outs, n.origin);
      return Status::Ok();
    }
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (n.outputs[k] != ir::kNoValue) return unsupported(where + "statistics outputs outside training mode");
    const int64_t count = shape_numel(x);
    layer = make_kernel_layer("BatchNormalization", std::string("kiln.batch_norm ") + storage_name(t),
                              [=](ExecState& s, const Layer& l) {
                                return launch_batch_norm(s.ptr(l.ins[0]), s.ptr(l.ins[1]), s.ptr(l.ins[2]),
                                                         s.ptr(l.ins[3]), s.ptr(l.ins[4]), s.ptr(l.outs[0]), t, count, c,
                                                         inner, eps, s.stream);
                              });
  } else if (n.op == ir::OpKind::kLRN) {
    if (rank < 3) return invalid_argument(where + "X rank " + std::to_string(rank) + ", expected at least 3");
    const int64_t size = n.attr_int("size", 0);
    if (size <= 0) return invalid_argument(where + "size must be positive");
    const float alpha = n.attr_float("alpha", 1e-4f), beta = n.attr_float("beta", 0.75f), bias = n.attr_float("bias", 1.f);
    layer = make_kernel_layer("LRN", std::string("kiln.lrn ") + storage_name(t), [=](ExecState& s, const Layer& l) {
      return launch_lrn(s.ptr(l.ins[0]), s.ptr(l.outs[0]), t, nb, c, inner, size, alpha, beta, bias, s.stream);
    });
  } else {
    NormAxesDesc d;
    std::vector<bool> reduced(rank, false);
    float eps;
    const bool instance = n.op == ir::OpKind::kInstanceNormalization;
    if (instance) {
      if (rank < 3) return invalid_argument(where + "X rank " + std::to_string(rank) + ", expected at least 3");
      for (int a = 2; a < rank; ++a) reduced[a] = true;
      KILN_RETURN_IF_ERROR(channel_operands(ctx, n, {1, 2}, c, where, &ins));
      eps = n.attr_float("epsilon", 1e-5f);
      d.eps_inside_sqrt = true;
      d.channels = c;
    } else {
      for (int64_t a : n.attr_ints("axes", {0, 2, 3})) {
        const int64_t ax = a < 0 ? a + rank : a;
        if (ax < 0 || ax >= rank) return invalid_argument(where + "axis " + std::to_string(a) + " out of range");
        reduced[ax] = true;
      }
      eps = 1e-9f;
      d.eps_inside_sqrt = false;
    }
    if (rank > kMaxRank) return unsupported(where + "rank " + std::to_string(rank) + " (at most " + std::to_string(kMaxRank) + ")");
    const std::vector<int64_t> strides = row_strides(x);
    for (int a = 0; a < rank; ++a) {
      if (reduced[a]) {
        d.red_dims[d.red_rank] = x[a];
        d.red_strides[d.red_rank++] = strides[a];
        d.group_size *= x[a];
      } else {
        d.keep_dims[d.keep_rank] = x[a];
        d.keep_strides[d.keep_rank++] = strides[a];
        d.groups *= x[a];
      }
    }
    layer = make_kernel_layer(ir::op_name(n.op), std::string("kiln.norm_axes ") + storage_name(t),
                              [=](ExecState& s, const Layer& l) {
                                const void* scale = instance ? s.ptr(l.ins[1]) : nullptr;
                                const void* bias = instance ? s.ptr(l.ins[2]) : nullptr;
                                return launch_norm_axes(s.ptr(l.ins[0]), scale, bias, s.ptr(l.outs[0]), t, d, eps,
                                                        s.stream);
                              });
  }
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
