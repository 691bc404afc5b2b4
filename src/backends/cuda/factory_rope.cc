// Rope (ops.def; docs/decisions/0067-fused-rope.md): one layer running Kiln's rotary-embedding
// kernel (kernels_rope.h). X and Y are in the layer's float storage; positions are read as stored
// (int32 / int64); inv_freq, or cos_cache and sin_cache, are read in float32 whatever the layer's
// precision (a constant converted on the host, not rounded to fp16 / bf16), so the angles and the
// rotation are computed in float32 as the reference computes them.
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels_rope.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

// ins: X, positions, inv_freq (angle mode) or cos_cache, sin_cache (cache mode); out: Y.
class RopeLayer : public Layer {
 public:
  RopeLayer(const RopeDesc& d, bool caches) : d_(d), caches_(caches) {
    op = "Rope";
    tactic = std::string("kiln.rope ") + storage_name(d.io) + (caches ? " caches" : " angles") +
             (d.interleaved ? " interleaved" : "");
  }
  std::string signature() const override {
    return op + " rows=" + std::to_string(d_.rows) + " h=" + std::to_string(d_.heads) + " inner=" +
           std::to_string(d_.inner) + " d=" + std::to_string(d_.d) + " r=" + std::to_string(2 * d_.half) +
           (d_.positions_int64 ? " i64 " : " i32 ") + tactic;
  }
  Status enqueue(ExecState& s) override {
    const auto* a = static_cast<const float*>(s.ptr(ins[2]));
    const auto* b = caches_ ? static_cast<const float*>(s.ptr(ins[3])) : nullptr;
    KILN_CUDA_CHECK(launch_rope(s.ptr(ins[0]), s.ptr(ins[1]), caches_ ? nullptr : a, caches_ ? a : nullptr, b,
                                s.ptr(outs[0]), d_, s.stream));
    return Status::Ok();
  }

 private:
  RopeDesc d_;
  bool caches_;
};

}  // namespace

Status lower_rope(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const bool caches = n.inputs.size() == 4;
  if (n.inputs.size() != 3 && !caches)
    return invalid_argument(where + "expects 3 inputs (X, positions, inv_freq) or 4 (X, positions, cos_cache, sin_cache), has " +
                            std::to_string(n.inputs.size()));
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (n.inputs[k] == ir::kNoValue) return invalid_argument(where + "input " + std::to_string(k) + " is missing");
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& pos = ctx.shape(n.inputs[1]);
  const int64_t r = static_cast<int64_t>(x.size()), head_axis = n.attr_int("head_axis", 1);
  if (r < 2 || head_axis < 0 || head_axis > r - 2)
    return invalid_argument(where + "X " + shape_str(x) + " with head_axis " + std::to_string(head_axis) +
                            ": expected rank >= 2 and a head axis before the last");
  RopeDesc d;
  d.d = x.back();
  d.heads = x[static_cast<size_t>(head_axis)];
  int64_t outer = 1;
  Shape want;
  for (int64_t i = 0; i + 1 < r; ++i) {
    if (i == head_axis) continue;
    want.push_back(x[static_cast<size_t>(i)]);
    (i < head_axis ? outer : d.inner) *= x[static_cast<size_t>(i)];
  }
  d.rows = outer * d.inner;
  if (pos != want)
    return invalid_argument(where + "positions " + shape_str(pos) + " are not X " + shape_str(x) +
                            " without its head and last axes, " + shape_str(want));
  const DataType pt = ctx.dtype(n.inputs[1]);
  if (pt != DataType::kInt64 && pt != DataType::kInt32)
    return invalid_argument(where + "positions have dtype " + dtype_name(pt) + ", expected int64 or int32");
  d.positions_int64 = pt == DataType::kInt64;
  const int64_t rdim = n.attr_int("rotary_dim", 0) > 0 ? n.attr_int("rotary_dim", 0) : d.d;
  if (rdim % 2 != 0 || rdim > d.d)
    return invalid_argument(where + "rotary_dim " + std::to_string(rdim) + " must be even and at most the head size " +
                            std::to_string(d.d));
  d.half = rdim / 2;
  if (d.half > kRopeMaxHalf)
    return unsupported(where + "rotary_dim " + std::to_string(rdim) + ": the CUDA kernel takes at most " +
                       std::to_string(2 * kRopeMaxHalf));
  if (d.rows > 0x7fffffffLL) return unsupported(where + std::to_string(d.rows) + " position rows (one block each, at most 2^31 - 1)");
  d.interleaved = n.attr_int("interleaved", 0) != 0;
  d.io = ctx.storage();
  if (!storage_is_float(d.io)) return unsupported(where + "output storage " + storage_name(d.io));
  for (size_t k = 2; k < n.inputs.size(); ++k) {
    const Shape& t = ctx.shape(n.inputs[k]);
    if (t.size() != (caches ? 2u : 1u) || t.back() != d.half)
      return invalid_argument(where + (caches ? (k == 2 ? "cos_cache " : "sin_cache ") : "inv_freq ") + shape_str(t) +
                              " is not " + (caches ? "[P, " : "[") + std::to_string(d.half) + "]");
  }
  if (caches) {
    if (ctx.shape(n.inputs[2]) != ctx.shape(n.inputs[3]))
      return invalid_argument(where + "cos_cache " + shape_str(ctx.shape(n.inputs[2])) + " and sin_cache " +
                              shape_str(ctx.shape(n.inputs[3])) + " differ");
    d.cache_positions = ctx.shape(n.inputs[2])[0];
  } else if (ctx.dtype(n.inputs[2]) != DataType::kFloat32) {
    return invalid_argument(where + "inv_freq has dtype " + dtype_name(ctx.dtype(n.inputs[2])) + ", expected float32");
  }

  KILN_ASSIGN_OR_RETURN(int xv, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int pv, ctx.operand_as(n.inputs[1], d.positions_int64 ? StorageType::kI64 : StorageType::kI32));
  std::vector<int> ins = {xv, pv};
  for (size_t k = 2; k < n.inputs.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(int v, ctx.operand_as(n.inputs[k], StorageType::kF32));
    ins.push_back(v);
  }
  ctx.add_layer(std::make_unique<RopeLayer>(d, caches), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
