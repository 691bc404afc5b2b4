// The registered layer factories (layer_factory.h): one line per op and table (float outputs;
// int32 / int64 / bool outputs); and the helpers the
// factories and the lowering share (pads, float/layout predicates, constants as floats, the
// weight-preparation thread pool).
#include <algorithm>
#include <array>
#include <cstring>
#include <thread>

#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {
namespace {

using ir::OpKind;

struct Registration {
  OpKind op;
  LayerFactory factory;
};

// BitShift: uint64 computes unsigned in kU64 (docs/decisions/0075), the narrow unsigned types
// through the narrow-integer kernels (0076).
Status lower_bitshift(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (ctx.storage() == StorageType::kU64) return lower_int_arith(ctx, n, where);
  return lower_narrow_int(ctx, n, where);
}

constexpr Registration kFactories[] = {
    {OpKind::kSoftmax, lower_softmax},
    {OpKind::kLogSoftmax, lower_softmax},
    {OpKind::kHardmax, lower_softmax},
    {OpKind::kReshape, lower_view},
    {OpKind::kFlatten, lower_view},
    {OpKind::kSqueeze, lower_view},
    {OpKind::kUnsqueeze, lower_view},
    {OpKind::kIdentity, lower_view},
    {OpKind::kDropout, lower_view},
    {OpKind::kTranspose, lower_strided},
    {OpKind::kSlice, lower_strided},
    {OpKind::kExpand, lower_strided},
    {OpKind::kDepthToSpace, lower_depth_space},
    {OpKind::kSpaceToDepth, lower_depth_space},
    {OpKind::kTile, lower_tile},
    {OpKind::kEyeLike, lower_eye_like},
    {OpKind::kConstantOfShape, lower_constant_of_shape},
    {OpKind::kPad, lower_pad},
    {OpKind::kResize, lower_resize},
    {OpKind::kUpsample, lower_resize},
    {OpKind::kReduceSum, lower_reduce},
    {OpKind::kReduceMean, lower_reduce},
    {OpKind::kReduceMax, lower_reduce},
    {OpKind::kReduceMin, lower_reduce},
    {OpKind::kReduceProd, lower_reduce},
    {OpKind::kReduceL1, lower_reduce},
    {OpKind::kReduceL2, lower_reduce},
    {OpKind::kReduceSumSquare, lower_reduce},
    {OpKind::kReduceLogSum, lower_reduce},
    {OpKind::kReduceLogSumExp, lower_reduce},
    {OpKind::kLayerNormalization, lower_layernorm},
    {OpKind::kRMSNormalization, lower_rms_norm},
    {OpKind::kMaxPool, lower_pool},
    {OpKind::kAveragePool, lower_pool},
    {OpKind::kGlobalAveragePool, lower_pool},
    {OpKind::kGlobalMaxPool, lower_pool},
    {OpKind::kCast, lower_cast},
    {OpKind::kCastLike, lower_cast},
    {OpKind::kSplit, lower_split},
    {OpKind::kWhere, lower_where},
    {OpKind::kConv, lower_conv},
    {OpKind::kFusedConv, lower_conv},
    {OpKind::kConvTranspose, lower_conv_nd},
    {OpKind::kBatchNormalization, lower_nn_norm},
    {OpKind::kInstanceNormalization, lower_nn_norm},
    {OpKind::kLRN, lower_nn_norm},
    {OpKind::kMeanVarianceNormalization, lower_nn_norm},
    {OpKind::kGridSample, lower_grid_sample},
    {OpKind::kGemm, lower_gemm},
    {OpKind::kMatMul, lower_gemm},
    {OpKind::kMatMulBias, lower_gemm},
    {OpKind::kQuantLinear, lower_quant_linear},
    {OpKind::kQuantConv, lower_quant_conv},
    {OpKind::kAttention, lower_attention},
    {OpKind::kPagedAttention, lower_paged_attention},
    {OpKind::kRope, lower_rope},
    {OpKind::kGather, lower_gather},
    {OpKind::kGatherND, lower_gather_nd},
    {OpKind::kGatherElements, lower_gather_elements},
    {OpKind::kRNN, lower_rnn},
    {OpKind::kGRU, lower_rnn},
    {OpKind::kLSTM, lower_rnn},
    {OpKind::kDet, lower_det},
    {OpKind::kMaxUnpool, lower_max_unpool},
    {OpKind::kDFT, lower_dft},
    {OpKind::kSTFT, lower_stft},
    {OpKind::kRoiAlign, lower_roi_align},
    {OpKind::kScatterElements, lower_scatter},
    {OpKind::kScatter, lower_scatter},
    {OpKind::kScatterND, lower_scatter},
    {OpKind::kReverseSequence, lower_reverse_sequence},
    {OpKind::kTopK, lower_topk},
    {OpKind::kOneHot, lower_one_hot},
    {OpKind::kCompress, lower_compress},
    {OpKind::kUnique, lower_unique},
    {OpKind::kConcat, lower_concat},
    {OpKind::kFusedPointwise, lower_fused_pointwise},
    {OpKind::kAdd, lower_pointwise},
    {OpKind::kSub, lower_pointwise},
    {OpKind::kMul, lower_pointwise},
    {OpKind::kDiv, lower_pointwise},
    {OpKind::kPow, lower_pointwise},
    {OpKind::kRelu, lower_pointwise},
    {OpKind::kSigmoid, lower_pointwise},
    {OpKind::kTanh, lower_pointwise},
    {OpKind::kErf, lower_pointwise},
    {OpKind::kExp, lower_pointwise},
    {OpKind::kSqrt, lower_pointwise},
    {OpKind::kNeg, lower_pointwise},
    {OpKind::kAbs, lower_pointwise},
    {OpKind::kReciprocal, lower_pointwise},
    {OpKind::kLog, lower_pointwise},
    {OpKind::kSin, lower_pointwise},
    {OpKind::kCos, lower_pointwise},
    {OpKind::kHardSwish, lower_pointwise},
    {OpKind::kGelu, lower_pointwise},
    {OpKind::kLeakyRelu, lower_pointwise},
    {OpKind::kElu, lower_pointwise},
    {OpKind::kHardSigmoid, lower_pointwise},
    {OpKind::kClip, lower_pw_op},
    {OpKind::kSoftplus, lower_pw_op},
    {OpKind::kSoftsign, lower_pw_op},
    {OpKind::kMish, lower_pw_op},
    {OpKind::kSign, lower_pw_op},
    {OpKind::kRound, lower_pw_op},
    {OpKind::kCeil, lower_pw_op},
    {OpKind::kFloor, lower_pw_op},
    {OpKind::kTan, lower_pw_op},
    {OpKind::kAsin, lower_pw_op},
    {OpKind::kAcos, lower_pw_op},
    {OpKind::kAtan, lower_pw_op},
    {OpKind::kSinh, lower_pw_op},
    {OpKind::kCosh, lower_pw_op},
    {OpKind::kAsinh, lower_pw_op},
    {OpKind::kAcosh, lower_pw_op},
    {OpKind::kAtanh, lower_pw_op},
    {OpKind::kSelu, lower_pw_op},
    {OpKind::kCelu, lower_pw_op},
    {OpKind::kThresholdedRelu, lower_pw_op},
    {OpKind::kShrink, lower_pw_op},
    {OpKind::kMod, lower_pw_op},
    {OpKind::kPRelu, lower_pw_op},
    {OpKind::kMax, lower_pw_op},
    {OpKind::kMin, lower_pw_op},
    {OpKind::kSum, lower_pw_op},
    {OpKind::kMean, lower_pw_op},
    {OpKind::kRange, lower_range},
    {OpKind::kCumSum, lower_cumsum},
    {OpKind::kTrilu, lower_trilu},
    {OpKind::kNegativeLogLikelihoodLoss, lower_nll_loss},
    {OpKind::kSoftmaxCrossEntropyLoss, lower_nll_loss},
    // docs/decisions/0076 (factory_qint.cc)
    {OpKind::kDequantizeLinear, lower_dequantize_linear},
    {OpKind::kTfIdfVectorizer, lower_tfidf},
};

// Nodes whose output 0 is int32 / int64 / bool (storage() is kI32 / kI64 / kBool): masks,
// positions, shapes. The movement factories copy elements by size, so they serve these too.
constexpr Registration kExactFactories[] = {
    {OpKind::kReshape, lower_view},
    {OpKind::kFlatten, lower_view},
    {OpKind::kSqueeze, lower_view},
    {OpKind::kUnsqueeze, lower_view},
    {OpKind::kIdentity, lower_view},
    {OpKind::kTranspose, lower_strided},
    {OpKind::kSlice, lower_strided},
    {OpKind::kExpand, lower_strided},
    {OpKind::kDepthToSpace, lower_depth_space},
    {OpKind::kSpaceToDepth, lower_depth_space},
    {OpKind::kTile, lower_tile},
    {OpKind::kEyeLike, lower_eye_like},
    {OpKind::kConstantOfShape, lower_constant_of_shape},
    {OpKind::kConcat, lower_concat},
    {OpKind::kSplit, lower_split},
    {OpKind::kGather, lower_gather},
    {OpKind::kGatherND, lower_gather_nd},
    {OpKind::kGatherElements, lower_gather_elements},
    {OpKind::kScatterElements, lower_scatter},
    {OpKind::kScatter, lower_scatter},
    {OpKind::kScatterND, lower_scatter},
    {OpKind::kReverseSequence, lower_reverse_sequence},
    {OpKind::kPad, lower_pad_exact},
    {OpKind::kNonMaxSuppression, lower_nms},
    {OpKind::kNonZero, lower_nonzero},
    {OpKind::kTopK, lower_topk},
    {OpKind::kOneHot, lower_one_hot},
    {OpKind::kCompress, lower_compress},
    {OpKind::kUnique, lower_unique},
    {OpKind::kCast, lower_cast},
    {OpKind::kCastLike, lower_cast},
    {OpKind::kWhere, lower_where},
    {OpKind::kEqual, lower_logical},
    {OpKind::kLess, lower_logical},
    {OpKind::kLessOrEqual, lower_logical},
    {OpKind::kGreater, lower_logical},
    {OpKind::kGreaterOrEqual, lower_logical},
    {OpKind::kAnd, lower_logical},
    {OpKind::kOr, lower_logical},
    {OpKind::kXor, lower_logical},
    {OpKind::kNot, lower_logical},
    {OpKind::kIsNaN, lower_logical},
    {OpKind::kIsInf, lower_logical},
    {OpKind::kAdd, lower_int_arith},
    {OpKind::kSub, lower_int_arith},
    {OpKind::kMul, lower_int_arith},
    {OpKind::kDiv, lower_int_arith},
    {OpKind::kMod, lower_int_arith},
    {OpKind::kNeg, lower_int_arith},
    {OpKind::kAbs, lower_int_arith},
    {OpKind::kMin, lower_int_arith},
    {OpKind::kMax, lower_int_arith},
    {OpKind::kPow, lower_int_arith},
    {OpKind::kRange, lower_range},
    {OpKind::kCumSum, lower_cumsum},
    {OpKind::kTrilu, lower_trilu},
    {OpKind::kArgMax, lower_arg_extreme},
    {OpKind::kArgMin, lower_arg_extreme},
    {OpKind::kReduceSum, lower_int_reduce},
    {OpKind::kReduceMax, lower_int_reduce},
    {OpKind::kReduceMin, lower_int_reduce},
    // float64 only (docs/decisions/0075):
    {OpKind::kReduceMean, lower_int_reduce},
    {OpKind::kReduceProd, lower_int_reduce},
    {OpKind::kReduceL1, lower_int_reduce},
    {OpKind::kReduceL2, lower_int_reduce},
    {OpKind::kReduceSumSquare, lower_int_reduce},
    {OpKind::kReduceLogSum, lower_int_reduce},
    {OpKind::kReduceLogSumExp, lower_int_reduce},
    {OpKind::kEinsum, lower_einsum},
    // Narrow integer values computed wide (docs/decisions/0076, factory_qint.cc).
    {OpKind::kQuantizeLinear, lower_narrow_int},
    {OpKind::kDynamicQuantizeLinear, lower_narrow_int},
    {OpKind::kClip, lower_narrow_int},
    // BitShift: uint64 computes in kU64 (0075), the narrow types through 0076's kernels.
    {OpKind::kBitShift, lower_bitshift},
    {OpKind::kMatMulInteger, lower_narrow_int},
    {OpKind::kQLinearMatMul, lower_narrow_int},
    {OpKind::kConvInteger, lower_narrow_int},
    {OpKind::kQLinearConv, lower_narrow_int},
    {OpKind::kMaxPool, lower_narrow_int},
};

template <size_t N>
std::array<LayerFactory, ir::kNumOps> table_of(const Registration (&regs)[N]) {
  std::array<LayerFactory, ir::kNumOps> t{};
  for (const Registration& r : regs) t[static_cast<size_t>(r.op)] = r.factory;
  return t;
}

}  // namespace

// Symmetric 2-D pads of a conv/pool node (auto_pad resolved); false if asymmetric.
bool symmetric_pads(const ir::Node& n, const Shape& in, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                    const std::vector<int64_t>& d, int64_t* ph, int64_t* pw) {
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    pads.assign(4, 0);
    for (int i = 0; i < 2; ++i) {
      const int64_t out = (in[2 + i] + s[i] - 1) / s[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[2 + i]);
      pads[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + 2] = total - pads[i];
    }
  } else if (ap == "VALID") {
    pads.assign(4, 0);
  }
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) return false;
  *ph = pads[0];
  *pw = pads[1];
  return true;
}

bool is_float(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16; }
bool layout_free(const Shape& s) { return s.size() != 4 || s[2] * s[3] == 1 || s[1] == 1; }

std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> f(static_cast<size_t>(t.numel()));
  if (t.dtype() == DataType::kFloat32) {
    if (!f.empty()) std::memcpy(f.data(), t.raw(), f.size() * sizeof(float));
    return f;
  }
  for (int64_t i = 0; i < t.numel(); ++i) f[i] = static_cast<float>(load_as_double(t.dtype(), t.raw(), i));
  return f;
}

LayerFactory find_layer_factory(ir::OpKind op) {
  static const std::array<LayerFactory, ir::kNumOps> table = table_of(kFactories);
  const auto i = static_cast<size_t>(op);
  return i < table.size() ? table[i] : nullptr;
}

LayerFactory find_exact_layer_factory(ir::OpKind op) {
  static const std::array<LayerFactory, ir::kNumOps> table = table_of(kExactFactories);
  const auto i = static_cast<size_t>(op);
  return i < table.size() ? table[i] : nullptr;
}

StorageType stored_float_type(const LowerContext& ctx, ir::ValueId v) {
  if (ctx.graph().value(v).constant) return StorageType::kF32;
  const int b = ctx.bound(v);
  return b >= 0 && storage_is_float(ctx.value_type(b)) ? ctx.value_type(b) : ctx.float_storage();
}

}  // namespace kiln::cuda
