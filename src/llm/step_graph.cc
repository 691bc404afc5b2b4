// The packed-token step graph over a paged KV cache (layout in step_graph.h; the layers in
// decoder_layers.cc, shared with the decoder graph).
#include "llm/step_graph.h"

#include <cmath>

#include "llm/decoder_layers.h"
#include "llm/weight_spec.h"

namespace kiln::llm {

namespace {

using ir::OpKind;
using ir::ValueId;

// Packed tokens: hidden [T, D], heads [T, H, hd], attention by PagedAttention over the pool.
class PackedLayout final : public TokenLayout {
 public:
  struct Cache {
    ValueId positions, token_seq, block_table, kv_pools;
  };
  PackedLayout(Cache cache, const StepGraphOptions& o) : cache_(cache), o_(o) {}

  int64_t hidden_rank() const override { return 2; }
  // [T, heads·hd] -> [T, heads, hd]
  ValueId split_heads(GraphEmitter& e, ValueId x, int64_t heads, int64_t hd, const std::string& name) override {
    return e.op(OpKind::kReshape, name + ".reshape", {x, e.shared_ints("shape.heads." + std::to_string(heads), {0, heads, hd})});
  }
  int64_t head_axis() const override { return 1; }  // [T, H, hd]; positions [T]
  ValueId attend(GraphEmitter& e, const ModelConfig& c, int64_t l, ValueId q, ValueId k, ValueId v,
                 const std::string& name) override {
    ValueId a = e.op(OpKind::kPagedAttention, name + ".paged",
                     {q, k, v, cache_.positions, cache_.token_seq, cache_.block_table, cache_.kv_pools},
                     {{"layer", int_attr(l)},
                      {"block_size", int_attr(o_.block_size)},
                      {"scale", float_attr(1.0 / std::sqrt(static_cast<double>(c.head_dim)))},
                      {"cache_dtype", ir::Attribute::of_string(o_.cache_dtype)},
                      {"k_scale", float_attr(kv_scale(l, 0))},
                      {"v_scale", float_attr(kv_scale(l, 1))},
                      {"sliding_window", int_attr(0)}});
    return e.op(OpKind::kReshape, name + ".merge", {a, e.shared_ints("shape.merge", {0, c.num_heads * c.head_dim})});
  }

 private:
  // Layer l's FP8 pool scale of K (kv 0) or V (kv 1): StepGraphOptions::kv_scales, 1 without.
  double kv_scale(int64_t l, int kv) const {
    if (o_.cache_dtype != "fp8e4m3fn" || o_.kv_scales.empty()) return 1.0;
    const std::pair<float, float>& s = o_.kv_scales[static_cast<size_t>(l)];
    return kv == 0 ? s.first : s.second;
  }

  Cache cache_;
  const StepGraphOptions& o_;
};

Status check_options(const StepGraphOptions& o) {
  auto positive = [](int64_t v, const char* what) -> Status {
    if (v >= 1) return Status::Ok();
    return invalid_argument(std::string("step graph options: ") + what + " " + std::to_string(v) + ", expected >= 1");
  };
  KILN_RETURN_IF_ERROR(positive(o.max_rows, "max_rows"));
  KILN_RETURN_IF_ERROR(positive(o.max_blocks_per_seq, "max_blocks_per_seq"));
  KILN_RETURN_IF_ERROR(positive(o.block_size, "block_size"));
  if (o.cache_dtype != "float32" && o.cache_dtype != "float16" && o.cache_dtype != "bfloat16" &&
      o.cache_dtype != "fp8e4m3fn")
    return invalid_argument("step graph options: cache_dtype '" + o.cache_dtype +
                            "', expected float32, float16, bfloat16 or fp8e4m3fn");
  for (size_t l = 0; l < o.kv_scales.size(); ++l)
    for (float sc : {o.kv_scales[l].first, o.kv_scales[l].second})
      if (!std::isfinite(sc) || sc <= 0)
        return invalid_argument("step graph options: kv_scales of layer " + std::to_string(l) + ": " +
                                std::to_string(sc) + ", expected finite and > 0");
  return Status::Ok();
}

Status check_fp8_scales(const ModelConfig& c, const std::map<std::string, float>& scales) {
  if (scales.empty()) return Status::Ok();
  const std::string arch = architecture_name(c.architecture);
  std::map<std::string, bool> seen;
  for (const Projection& p : decoder_projections(c)) {
    seen[p.name] = true;
    if (p.k % 16 != 0 || p.n % 16 != 0)
      return invalid_argument("fp8: " + arch + " projection '" + p.name + "' is [K " + std::to_string(p.k) + ", N " +
                              std::to_string(p.n) + "]; FP8 QuantLinear needs K and N multiples of 16");
    auto it = scales.find(p.name);
    if (it == scales.end()) return invalid_argument("fp8: no x_scale for projection '" + p.name + "'");
    if (!std::isfinite(it->second) || it->second <= 0)
      return invalid_argument("fp8: x_scale " + std::to_string(it->second) + " of projection '" + p.name +
                              "', expected finite and > 0");
  }
  for (const auto& [name, scale] : scales)
    if (!seen.count(name)) return invalid_argument("fp8: x_scale for '" + name + "', which is no projection of the " + arch + " model");
  return Status::Ok();
}

// A checkpoint's FP8 projections kept as stored: no calibrated scales beside them, and the 8-bit
// GEMMs' alignment for each (checked once the weights passed check_weights).
Status check_checkpoint_fp8(const ModelConfig& c, const Checkpoint& ck, const StepGraphOptions& o) {
  if (!o.fp8_x_scales.empty())
    return invalid_argument("fp8: checkpoint '" + ck.dir() + "' carries its own FP8 scales (" + ck.fp8_quantization()->describe() +
                            "); fp8_x_scales apply to float weights (set checkpoint_fp8 = false to dequantize them first)");
  for (const Projection& p : decoder_projections(c)) {
    const SafetensorsTensor* t = ck.find(p.module + ".weight");
    if (!t || t->dtype != DataType::kFloat8E4M3FN) continue;
    if (p.k % 16 != 0 || p.n % 16 != 0)
      return invalid_argument("fp8: " + std::string(architecture_name(c.architecture)) + " projection '" + p.name +
                              "' (FP8 in checkpoint '" + ck.dir() + "') is [K " + std::to_string(p.k) + ", N " +
                              std::to_string(p.n) + "]; FP8 QuantLinear needs K and N multiples of 16");
  }
  return Status::Ok();
}

}  // namespace

int64_t kv_block_elements(const ModelConfig& config, int64_t block_size) {
  return 2 * config.num_kv_heads * block_size * config.head_dim;
}

StatusOr<ir::Graph> build_step_graph(const ModelConfig& config, const Checkpoint& checkpoint,
                                     const StepGraphOptions& options) {
  KILN_RETURN_IF_ERROR(check_options(options));
  if (!options.kv_scales.empty() && static_cast<int64_t>(options.kv_scales.size()) != config.num_layers)
    return invalid_argument("step graph options: kv_scales has " + std::to_string(options.kv_scales.size()) +
                            " entries, the model has " + std::to_string(config.num_layers) + " layers");
  KILN_RETURN_IF_ERROR(check_fp8_scales(config, options.fp8_x_scales));
  KILN_RETURN_IF_ERROR(check_weights(config, checkpoint.weight_prefix(), checkpoint.tensors(), "'" + checkpoint.dir() + "'",
                                     checkpoint.fp8_quantization() ? &*checkpoint.fp8_quantization() : nullptr));
  const bool checkpoint_fp8 = options.checkpoint_fp8 && checkpoint.fp8_quantization().has_value();
  if (checkpoint_fp8) KILN_RETURN_IF_ERROR(check_checkpoint_fp8(config, checkpoint, options));
  ir::Graph g;
  g.name = std::string(architecture_name(config.architecture)) + "_paged_step";
  GraphEmitter e(&g);
  if (!options.fp8_x_scales.empty()) {
    e.set_fp8_x_scales(&options.fp8_x_scales);
    e.set_fp8_per_tensor_weights(options.fp8_per_tensor_weights);
    g.name += "_fp8";
  }
  CheckpointWeights w(checkpoint, &e);
  if (checkpoint_fp8) {
    w.set_keep_fp8(true);
    e.set_fp8_per_tensor_weights(options.fp8_per_tensor_weights);
    g.name += "_fp8";
  }
  const ir::Dim t = ir::Dim::sym(kStepTokensDim);
  const ir::Dim r = ir::Dim::known(options.max_rows);
  ValueId ids = e.input(kStepInputIdsName, DataType::kInt64, ir::SymShape{t});
  ValueId positions = e.input(kStepPositionIdsName, DataType::kInt64, ir::SymShape{t});
  PackedLayout::Cache cache;
  cache.positions = positions;
  cache.token_seq = e.input(kStepTokenSeqName, DataType::kInt32, ir::SymShape{t});
  cache.block_table =
      e.input(kStepBlockTableName, DataType::kInt32, ir::SymShape{r, ir::Dim::known(options.max_blocks_per_seq)});
  cache.kv_pools =
      e.input(kStepKvPoolsName, DataType::kInt64, ir::SymShape{ir::Dim::known(config.num_layers), ir::Dim::known(2)});
  ValueId logit_rows = e.input(kStepLogitRowsName, DataType::kInt64, ir::SymShape{r});
  PackedLayout layout(cache, options);
  KILN_ASSIGN_OR_RETURN(ValueId x, emit_decoder_layers(e, w, config, checkpoint.weight_prefix(), ids, positions, layout));
  KILN_RETURN_IF_ERROR(e.status());
  e.set_fp8_x_scales(nullptr);  // lm_head stays float
  // The rows that want logits, [R, D], before the final norm (it is per row): R lm_head rows, not T.
  x = e.op(OpKind::kGather, "logit_rows", {x, logit_rows}, {{"axis", int_attr(0)}});
  KILN_ASSIGN_OR_RETURN(ValueId logits, emit_lm_head(e, w, config, checkpoint.weight_prefix(), x, kStepLogitsName));
  e.output(logits);
  // The greedy token of each row on the device, so a runner whose rows are all greedy copies R
  // int64s back instead of R x vocab floats (decision 0060, addendum).
  ValueId next = e.op(OpKind::kArgMax, kStepNextTokensName, {logits},
                      {{"axis", int_attr(1)}, {"keepdims", int_attr(0)}, {"select_last_index", int_attr(0)}},
                      DataType::kInt64, kStepNextTokensName);
  g.value(next).shape = ir::SymShape{r};
  e.output(next);
  KILN_RETURN_IF_ERROR(verified(g));
  return g;
}

}  // namespace kiln::llm
