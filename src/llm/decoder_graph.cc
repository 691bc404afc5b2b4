// The decoder forward step as an ir::Graph: GPT-2 and the Llama family (layouts in decoder_graph.h;
// the layers themselves in decoder_layers.cc, shared with the step graph).
#include "llm/decoder_graph.h"

#include <cmath>
#include <limits>

#include "llm/decoder_layers.h"
#include "llm/weight_spec.h"

namespace kiln::llm {

namespace {

using ir::OpKind;
using ir::ValueId;

ir::SymShape sym(std::initializer_list<ir::Dim> dims) { return ir::SymShape(dims); }
ir::Dim known(int64_t v) { return ir::Dim::known(v); }
ir::Dim named(const char* s) { return ir::Dim::sym(s); }

// One sequence per batch row: hidden [B, S, D], heads [B, H, S, hd], the cache Concat-ed.
class BatchLayout final : public TokenLayout {
 public:
  BatchLayout(std::vector<ValueId> past_k, std::vector<ValueId> past_v) : past_k_(std::move(past_k)), past_v_(std::move(past_v)) {}
  int64_t hidden_rank() const override { return 3; }
  // [B, S, heads·hd] -> [B, heads, S, hd]
  ValueId split_heads(GraphEmitter& e, ValueId x, int64_t heads, int64_t hd, const std::string& name) override {
    ValueId shape = e.shared_ints("shape.heads." + std::to_string(heads), {0, 0, heads, hd});
    ValueId r = e.op(OpKind::kReshape, name + ".reshape", {x, shape});
    return e.op(OpKind::kTranspose, name + ".transpose", {r}, {{"perm", ints_attr({0, 2, 1, 3})}});
  }
  int64_t head_axis() const override { return 1; }  // [B, H, S, hd]; positions [B, S]
  // Attention over past ++ new: q [B, H, S, hd], k/v [B, KV, S, hd] (new only); records the
  // present K/V (graph outputs).
  ValueId attend(GraphEmitter& e, const ModelConfig& c, int64_t l, ValueId q, ValueId k, ValueId v,
                 const std::string& name) override {
    ValueId pk = e.op(OpKind::kConcat, name + ".present_key", {past_k_[l], k}, {{"axis", int_attr(2)}}, DataType::kFloat32,
                      present_key_name(l));
    ValueId pv = e.op(OpKind::kConcat, name + ".present_value", {past_v_[l], v}, {{"axis", int_attr(2)}},
                      DataType::kFloat32, present_value_name(l));
    presents.push_back(pk);
    presents.push_back(pv);
    ValueId a = e.op(OpKind::kAttention, name + ".sdpa", {q, pk, pv},
                     {{"is_causal", int_attr(1)}, {"scale", float_attr(1.0 / std::sqrt(static_cast<double>(c.head_dim)))}});
    ValueId t = e.op(OpKind::kTranspose, name + ".merge.transpose", {a}, {{"perm", ints_attr({0, 2, 1, 3})}});
    return e.op(OpKind::kReshape, name + ".merge.reshape", {t, e.shared_ints("shape.merge", {0, 0, c.num_heads * c.head_dim})});
  }

  std::vector<ValueId> presents;  // present_key.L, present_value.L per layer, in order

 private:
  std::vector<ValueId> past_k_, past_v_;
};

constexpr const char* kLastPositionNode = "last_position";

// The last position only, when the caller wants one row of logits: x [B, S, D] -> [B, 1, D].
ValueId last_position(GraphEmitter& e, ValueId x) {
  return e.op(OpKind::kSlice, kLastPositionNode, {x, e.ints("last.start", {-1}), e.ints("last.end", {std::numeric_limits<int64_t>::max()}),
                                                e.ints("last.axis", {1})});
}

Status build(GraphEmitter& e, CheckpointWeights& w, const ModelConfig& c, const std::string& prefix,
             const DecoderGraphOptions& o) {
  ValueId ids = e.input(kInputIdsName, DataType::kInt64, sym({named("batch"), named("seq")}));
  ValueId positions = e.input(kPositionIdsName, DataType::kInt64, sym({named("batch"), named("seq")}));
  std::vector<ValueId> past_k, past_v;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const ir::SymShape kv = sym({named("batch"), known(c.num_kv_heads), named("past"), known(c.head_dim)});
    past_k.push_back(e.input(past_key_name(l), DataType::kFloat32, kv));
    past_v.push_back(e.input(past_value_name(l), DataType::kFloat32, kv));
  }
  BatchLayout layout(std::move(past_k), std::move(past_v));
  KILN_ASSIGN_OR_RETURN(ValueId x, emit_decoder_layers(e, w, c, prefix, ids, positions, layout));
  if (!o.all_logits) x = last_position(e, x);
  KILN_ASSIGN_OR_RETURN(ValueId logits, emit_lm_head(e, w, c, prefix, x, kLogitsName));
  e.output(logits);
  for (ValueId v : layout.presents) e.output(v);
  return Status::Ok();
}

}  // namespace

std::string past_key_name(int64_t layer) { return "past_key." + std::to_string(layer); }
std::string past_value_name(int64_t layer) { return "past_value." + std::to_string(layer); }
std::string present_key_name(int64_t layer) { return "present_key." + std::to_string(layer); }
std::string present_value_name(int64_t layer) { return "present_value." + std::to_string(layer); }

StatusOr<ir::Graph> build_decoder_graph(const ModelConfig& config, const Checkpoint& checkpoint,
                                        const DecoderGraphOptions& options) {
  KILN_RETURN_IF_ERROR(check_weights(config, checkpoint.weight_prefix(), checkpoint.tensors(), "'" + checkpoint.dir() + "'",
                                     checkpoint.fp8_quantization() ? &*checkpoint.fp8_quantization() : nullptr));
  ir::Graph g;
  g.name = std::string(architecture_name(config.architecture)) + "_decoder_step";
  GraphEmitter e(&g);
  CheckpointWeights w(checkpoint, &e);
  KILN_RETURN_IF_ERROR(build(e, w, config, checkpoint.weight_prefix(), options));
  KILN_RETURN_IF_ERROR(verified(g));
  return g;
}

StatusOr<ir::Graph> with_all_logits(const ir::Graph& last_only) {
  ir::Graph g = last_only;  // values share their constant tensors
  for (ir::Node& n : g.nodes) {
    if (n.removed || n.name != kLastPositionNode) continue;
    const ValueId in = n.inputs[0], out = n.outputs[0];
    for (ir::Node& m : g.nodes)
      for (ValueId& v : m.inputs)
        if (v == out) v = in;
    n.removed = true;
    g.compact();
    KILN_RETURN_IF_ERROR(verified(g));
    return g;
  }
  return invalid_argument("graph '" + last_only.name + "' has no '" + kLastPositionNode + "' node (built with all_logits on?)");
}

StatusOr<ir::Graph> build_rope_graph(const ModelConfig& config) {
  ir::Graph g;
  g.name = "rope";
  GraphEmitter e(&g);
  ValueId x = e.input("x", DataType::kFloat32, sym({named("batch"), named("heads"), named("seq"), known(config.head_dim)}));
  ValueId p = e.input(kPositionIdsName, DataType::kInt64, sym({named("batch"), named("seq")}));
  KILN_ASSIGN_OR_RETURN(ValueId inv_freq, emit_rope_inv_freq(e, config));
  e.output(emit_rope(e, inv_freq, p, x, 1, "rope"));
  KILN_RETURN_IF_ERROR(verified(g));
  return g;
}

}  // namespace kiln::llm
