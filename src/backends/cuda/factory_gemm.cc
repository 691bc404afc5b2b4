// Gemm, MatMul and MatMulBias (passes/fuse_matmul_add). With a constant 2-D weight B: one cuBLASLt
// GEMM, A [*, M, K] row-major (leading dims folded into M) x B [K, N] (or [N, K] with Gemm's transB),
// alpha folded into the weight and beta into the bias, the bias vector of N in the epilogue (ONNX
// Operators.md Gemm: Y = alpha * A' * B' + beta * C; transA and a C that is not a vector of N are
// refused); the activation attribute (Relu, passes/fuse_gemm_activation.cc) is cuBLASLt's RELU
// epilogue. Otherwise MatMul is a batched GEMM over numpy-broadcast batch dims (ONNX MatMul,
// gpu_ops.h plan_batched_matmul), both operands row-major. Storage fp32 (TF32 when the plan allows),
// fp16 or bf16 with float accumulation.
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

// A constant 2-D weight behind an input of rank >= 2: one GEMM.
bool has_2d_weight(const LowerContext& ctx, const ir::Node& n) {
  const auto& c = ctx.graph().value(n.inputs[1]).constant;
  return c && c->rank() == 2 && ctx.shape(n.inputs[0]).size() >= 2;
}

Status lower_batched_matmul(LowerContext& ctx, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(BatchedMatMulParams p, plan_batched_matmul(n, ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1]),
                                                                   ctx.shape(n.outputs[0])));
  KILN_ASSIGN_OR_RETURN(int a, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int b, ctx.row_major_operand(n.inputs[1]));
  KILN_ASSIGN_OR_RETURN(auto layer, make_batched_matmul_layer(p, ctx.storage(), ctx.options().precision.tf32));
  ctx.add_layer(std::move(layer), n.name, {a, b}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace

Status lower_gemm(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.op == ir::OpKind::kMatMul && !has_2d_weight(ctx, n)) return lower_batched_matmul(ctx, n);
  const ir::Graph& g = ctx.graph();
  const Shape& a = ctx.shape(n.inputs[0]);
  const auto& wc = g.value(n.inputs[1]).constant;
  if (!wc || wc->rank() != 2 || a.size() < 2) return unsupported(where + "GEMM needs a constant 2-D weight");
  GemmParams p{};
  const bool gemm = n.op == ir::OpKind::kGemm;
  // MatMulBias (A [*, M, K] of rank > 2): the leading dims fold into M, the bias is the epilogue's.
  const bool mm_bias = n.op == ir::OpKind::kMatMulBias;
  if (gemm && (n.attr_int("transA", 0) != 0 || a.size() != 2)) return unsupported(where + "transA");
  p.weight_is_nk = gemm && n.attr_int("transB", 0) != 0;
  p.k = a.back();
  p.m = p.k > 0 ? shape_numel(a) / p.k : 0;
  p.n = p.weight_is_nk ? wc->dim(0) : wc->dim(1);
  if ((p.weight_is_nk ? wc->dim(1) : wc->dim(0)) != p.k)
    return invalid_argument(where + "inner dims differ: " + shape_str(a) + " x " + shape_str(wc->shape()) +
                            (p.weight_is_nk ? " (transB)" : ""));
  if (mm_bias && (n.inputs.size() < 3 || n.inputs[2] == ir::kNoValue)) return invalid_argument(where + "bias is required");
  // passes/fuse_gemm_activation.cc's Relu: cuBLASLt's RELU(_BIAS) epilogue, max(0, x) after the
  // bias (cublasLt.h cublasLtEpilogue_t; docs/decisions/0058).
  const std::string act = n.attr_string("activation", "");
  if (!act.empty() && act != "Relu" && act != "GeluTanh")
    return unsupported(where + "activation '" + act + "': the GEMM epilogue takes Relu or GeluTanh");
  p.relu = act == "Relu";
  // GeluTanh: cuBLASLt's GELU epilogue where it is checked to compute that formula on this
  // device (cublaslt_gelu_is_tanh), else the GEMM and then Kiln's GELU kernel (0058 addendum 2).
  const bool gelu_layer = act == "GeluTanh" && !cublaslt_gelu_is_tanh();
  p.gelu_tanh = act == "GeluTanh" && !gelu_layer;
  const StorageType st = ctx.storage();
  const bool has_residual = mm_bias && n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
  // An N whose rows are not 16-byte aligned (GPT-2's vocabulary of 50,257): the weight and bias are
  // stored padded with zeros to n_pad outputs, so the layer may also run as the padded GEMM + a
  // compacting copy (gpu_layers.h gemm_padded_n; the builder times both forms). Only large N (the
  // LM heads this is for) and no residual (the padded form has no C in Y's layout).
  p.n_pad = p.n >= 256 && !has_residual ? gemm_padded_n(p.n, st) : 0;
  const int64_t nw = p.n_pad > 0 ? p.n_pad : p.n;  // outputs stored
  std::vector<float> w;
  const float alpha = gemm ? n.attr_float("alpha", 1.f) : 1.f;
  const Shape w_shape = p.weight_is_nk ? Shape{nw, p.k} : Shape{p.k, nw};
  KILN_ASSIGN_OR_RETURN(int wa, ctx.upload(g.value(n.inputs[1]).name, n.inputs[1], static_cast<size_t>(nw * p.k),
                                           w_shape, false, [&] {
                                             w = floats_of(*wc);
                                             for (float& v : w) v *= alpha;
                                             if (nw == p.n) return w.data();
                                             // Zero outputs n..n_pad: extra rows of [N, K], extra columns of [K, N].
                                             std::vector<float> padded(static_cast<size_t>(nw * p.k), 0.f);
                                             if (p.weight_is_nk) {
                                               std::copy(w.begin(), w.end(), padded.begin());
                                             } else {
                                               for (int64_t r = 0; r < p.k; ++r)
                                                 std::copy(w.begin() + r * p.n, w.begin() + (r + 1) * p.n,
                                                           padded.begin() + r * nw);
                                             }
                                             w = std::move(padded);
                                             return w.data();
                                           }));
  std::vector<int> ins;
  KILN_ASSIGN_OR_RETURN(int xa, ctx.activation(n.inputs[0]));
  ins = {ctx.as_layout(xa, false), wa};
  if ((gemm || mm_bias) && n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    const auto& bc = g.value(n.inputs[2]).constant;
    if (!bc || bc->numel() != p.n) return unsupported(where + "bias must be a constant vector of N");
    std::vector<float> b;
    const float beta = n.attr_float("beta", 1.f);
    KILN_ASSIGN_OR_RETURN(int ba, ctx.upload(n.name + ":bias", n.inputs[2], static_cast<size_t>(nw), {nw}, false, [&] {
      b = floats_of(*bc);
      for (float& v : b) v *= beta;
      b.resize(static_cast<size_t>(nw), 0.f);
      return b.data();
    }));
    ins.push_back(ba);
    p.has_bias = true;
  }
  // passes::fuse_gemm_residual's R (MatMulBias input 3): cuBLASLt's C with beta 1, read in Y's
  // row-major layout and storage (ops.def; the GEMM layer's has_residual).
  if (has_residual) {
    if (!act.empty()) return unsupported(where + "a residual with an activation");
    KILN_ASSIGN_OR_RETURN(int ra, ctx.activation(n.inputs[3]));
    ins.push_back(ctx.as_layout(ra, false));
    p.has_residual = true;
  }
  const Shape& ys = ctx.shape(n.outputs[0]);
  const int out = ctx.new_value(g.value(n.outputs[0]).name, ys, st, false);
  KILN_ASSIGN_OR_RETURN(auto layer, make_gemm_layer(p, st, ctx.options().precision.tf32));
  if (!gelu_layer) {
    ctx.add_layer(std::move(layer), n.name, ins, {out}, n.origin);
    ctx.bind(n.outputs[0], out);
    return Status::Ok();
  }
  // The GEMM into a value of its own, then GELU (tanh form) over it, flat.
  const int pre = ctx.new_value(g.value(n.outputs[0]).name + "/pre_gelu", ys, st, false);
  ctx.add_layer(std::move(layer), n.name, ins, {pre}, n.origin);
  BroadcastDesc d;
  d.rank = 1;
  d.out_dims[0] = shape_numel(ys);
  d.a_strides[0] = 1;
  auto gelu = make_pointwise_layer(PointwiseOp::kGeluTanh, d, st, 0.f, 0.f);
  gelu->op = "Gemm";  // the Gemm node's epilogue, as a second kernel
  gelu->tactic = std::string("kiln.pointwise gelu_tanh after the GEMM ") + storage_name(st);
  ctx.add_layer(std::move(gelu), n.name + "/gelu_tanh", {pre}, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
