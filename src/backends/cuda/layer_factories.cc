// The registered layer factories (layer_factory.h): one line per op.
#include <array>

#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

using ir::OpKind;

struct Registration {
  OpKind op;
  LayerFactory factory;
};

constexpr Registration kFactories[] = {
    {OpKind::kSoftmax, lower_softmax},
    {OpKind::kLogSoftmax, lower_softmax},
    {OpKind::kReshape, lower_view},
    {OpKind::kFlatten, lower_view},
    {OpKind::kSqueeze, lower_view},
    {OpKind::kUnsqueeze, lower_view},
    {OpKind::kIdentity, lower_view},
    {OpKind::kDropout, lower_view},
    {OpKind::kTranspose, lower_strided},
    {OpKind::kSlice, lower_strided},
    {OpKind::kExpand, lower_strided},
    {OpKind::kPad, lower_pad},
    {OpKind::kResize, lower_resize},
    {OpKind::kReduceSum, lower_reduce},
    {OpKind::kReduceMean, lower_reduce},
    {OpKind::kReduceMax, lower_reduce},
    {OpKind::kReduceMin, lower_reduce},
    {OpKind::kLayerNormalization, lower_layernorm},
    {OpKind::kRMSNormalization, lower_rms_norm},
};

}  // namespace

LayerFactory find_layer_factory(ir::OpKind op) {
  static const std::array<LayerFactory, ir::kNumOps> table = [] {
    std::array<LayerFactory, ir::kNumOps> t{};
    for (const Registration& r : kFactories) t[static_cast<size_t>(r.op)] = r.factory;
    return t;
  }();
  const auto i = static_cast<size_t>(op);
  return i < table.size() ? table[i] : nullptr;
}

}  // namespace kiln::cuda
