// The registered layer factories (layer_factory.h): one line per op.
#include <algorithm>
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
    {OpKind::kMaxPool, lower_pool},
    {OpKind::kAveragePool, lower_pool},
    {OpKind::kGlobalAveragePool, lower_pool},
    {OpKind::kGlobalMaxPool, lower_pool},
    {OpKind::kCast, lower_cast},
    {OpKind::kSplit, lower_split},
    {OpKind::kWhere, lower_where},
};

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
