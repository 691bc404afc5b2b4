// The decoder layer math shared by the two LLM graphs (decoder_graph.h: one sequence per batch
// row, KV cache as graph inputs/outputs, docs/decisions/0053; step_graph.h: packed tokens of many
// sequences, paged KV cache, docs/decisions/0059): the graph emitter, the checkpoint's weights as
// float32 constants, and GPT-2 / Llama-family layers written once against a TokenLayout that says
// how a graph lays out its tokens and attends. Layer formulas in decoder_graph.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "llm/checkpoint.h"
#include "llm/fp8_checkpoint.h"
#include "llm/model_config.h"

namespace kiln::llm {

// Appends values and nodes to a graph; every node gets one output named "<node>:0" unless told.
// Nodes carry opset 21 (the ONNX semantics every node follows: inputs, not attributes, for axes).
class GraphEmitter {
 public:
  explicit GraphEmitter(ir::Graph* g);

  ir::ValueId input(const std::string& name, DataType dtype, ir::SymShape shape);
  ir::ValueId constant(const std::string& name, Tensor t);
  ir::ValueId ints(const std::string& name, const std::vector<int64_t>& v);  // int64 [n] constant
  ir::ValueId op(ir::OpKind kind, const std::string& name, std::vector<ir::ValueId> in,
                 std::map<std::string, ir::Attribute> attrs = {}, DataType out_dtype = DataType::kFloat32,
                 const std::string& out_name = "");
  void output(ir::ValueId v) { g_->outputs.push_back(v); }
  // Shared small constants (shapes, axes, slice bounds), made once per key (the value's name).
  ir::ValueId shared_ints(const std::string& key, const std::vector<int64_t>& v);
  // FP8 projections (step_graph.h's StepGraphOptions::fp8_x_scales): projection name -> x_scale.
  // While set (not owned; must outlive the emission), the layers emit every named projection as
  // QuantLinear (emit_projection); nullptr = float MatMuls.
  void set_fp8_x_scales(const std::map<std::string, float>* scales) { fp8_ = scales; }
  const std::map<std::string, float>* fp8_x_scales() const { return fp8_; }
  // Weight scales of those projections: per output channel (false, the default) or one per tensor,
  // shared by the projections that read one input (q/k/v, gate/up; StepGraphOptions::
  // fp8_per_tensor_weights). For an FP8 checkpoint's layers kept as stored (CheckpointWeights::
  // set_keep_fp8): whether q/k/v and gate/up are requantized to one weight scale per group
  // (share_fp8_input, decision 0086).
  void set_fp8_per_tensor_weights(bool on) { fp8_per_tensor_ = on; }
  bool fp8_per_tensor_weights() const { return fp8_per_tensor_; }
  const ir::Graph& graph() const { return *g_; }
  // The first error of an emission step that cannot return one (a projection's fp8 weight);
  // the graph builders check status() after the layers.
  void fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  const Status& status() const { return status_; }

 private:
  ir::Graph* g_;
  std::map<std::string, ir::ValueId> shared_;
  const std::map<std::string, float>* fp8_ = nullptr;
  bool fp8_per_tensor_ = false;
  Status status_ = Status::Ok();
};

// One linear projection of the decoder layers (the attention and MLP matrices; not the embedding,
// not lm_head): its node name in the graphs ("h.L.attn.c_attn", "h.L.attn.c_proj", "h.L.mlp.c_fc",
// "h.L.mlp.c_proj" for GPT-2; "layers.L.{q,k,v,o}_proj", "layers.L.{gate,up,down}_proj" for the
// Llama family), in features K and out features N (y [.., N] = x [.., K] W), and the checkpoint's
// module ("model.layers.L.self_attn.q_proj", "model.layers.L.mlp.gate_proj"; GPT-2's Conv1D
// "h.L.attn.c_attn" without the optional "transformer." prefix).
struct Projection {
  std::string name;
  int64_t k = 0, n = 0;
  std::string module;
};
// Every projection of `c`, layer by layer in graph order.
std::vector<Projection> decoder_projections(const ModelConfig& c);

// FP8 E4M3FN weight of a projection: from W [K, N] float32 (the graphs' x W layout), Wq [N, K]
// float8e4m3fn with Wq[n, k] = E4M3FN(W[k, n] / w_scale[n]) (core double_to_fp8e4m3fn: round to
// nearest even, saturating at ±448) and w_scale [N] float32. Per output channel (tensor_amax < 0):
// w_scale[n] = max_k |W[k, n]| / 448 (1 for an all-zero channel). Per tensor (tensor_amax >= 0, the
// amax of W — or of several weights sharing one scale, which must cover W's own — as
// max_abs_weight gives it): every w_scale[n] = tensor_amax / 448 (1 for 0), Transformer Engine's and
// ModelOpt's FP8 recipe, which cuBLASLt's FP8 GEMM applies as a scalar in its epilogue (decision
// 0085). InvalidArgument for a non-2-D or non-float32 W, or a non-finite weight, naming `name`.
struct Fp8Weight {
  Tensor w;      // [N, K] float8e4m3fn
  Tensor scale;  // [N] float32
};
StatusOr<Fp8Weight> quantize_weight_fp8(const Tensor& w, const std::string& name, double tensor_amax = -1);
// max |W| over a float32 tensor's finite values (0 for an empty one).
double max_abs_weight(const Tensor& w);

ir::Attribute int_attr(int64_t v);
ir::Attribute float_attr(double v);
ir::Attribute ints_attr(std::vector<int64_t> v);

// A linear layer's weight as the layers emit it: a float32 constant [in, out] (the graphs' x W
// layout), or — an FP8 checkpoint's layer kept as stored (CheckpointWeights::set_keep_fp8) — its
// E4M3FN weight [out, in] with scales, QuantLinear's operands (fp8_checkpoint.h).
struct LinearWeight {
  ir::ValueId w = ir::kNoValue;  // float32 [in, out]; kNoValue when fp8 is set
  std::optional<Fp8Linear> fp8;
};

// The checkpoint's weights as float32 constant values (F16/BF16 converted once; F32 weights kept
// as stored wrap the file's mapping; an FP8 checkpoint's F8_E4M3 weights dequantized, W = fp8 ·
// weight_scale). Errors name the tensor and the checkpoint directory.
class CheckpointWeights {
 public:
  CheckpointWeights(const Checkpoint& ck, GraphEmitter* e) : ck_(ck), e_(e) {}
  // The tensor as stored, in float32.
  StatusOr<ir::ValueId> as_is(const std::string& name);
  // A 2-D weight [rows, cols] stored transposed, [cols, rows] (nn.Linear's [out, in] -> [in, out]).
  StatusOr<ir::ValueId> transposed(const std::string& name);
  // The nn.Linear `module`'s weight ("module.weight"): transposed to float32 [in, out], or with
  // set_keep_fp8(true) and an F8_E4M3 weight, the stored E4M3 weight and scales (read_fp8_linear).
  StatusOr<LinearWeight> linear(const std::string& module);
  // FP8 checkpoints: keep F8_E4M3 linear weights as stored for QuantLinear (the step graph's
  // StepGraphOptions::checkpoint_fp8) instead of dequantizing them to float32.
  void set_keep_fp8(bool on) { keep_fp8_ = on; }

 private:
  std::string where(const std::string& name) const;
  StatusOr<Tensor> load(const std::string& name);

  const Checkpoint& ck_;
  GraphEmitter* e_;
  bool keep_fp8_ = false;
};

// How a graph lays out its tokens and attends; the layers are written against it. Hidden states
// have rank hidden_rank() with the model dim last ([B, S, D] or [T, D]).
class TokenLayout {
 public:
  virtual ~TokenLayout() = default;
  virtual int64_t hidden_rank() const = 0;
  // [..., heads·hd] -> the per-head form attend() takes, head_dim last (rank hidden_rank() + 1).
  virtual ir::ValueId split_heads(GraphEmitter& e, ir::ValueId x, int64_t heads, int64_t hd,
                                  const std::string& name) = 0;
  // The heads' axis in the per-head form (where Rope finds them; positions are the per-head
  // form without that axis and head_dim).
  virtual int64_t head_axis() const = 0;
  // Attention of layer `layer` over per-head q [.., Hq, .., hd] and the step's new k, v (keys
  // rotated), heads merged back: [..., Hq·hd] in the hidden layout.
  virtual ir::ValueId attend(GraphEmitter& e, const ModelConfig& c, int64_t layer, ir::ValueId q, ir::ValueId k,
                             ir::ValueId v, const std::string& name) = 0;
};

// RoPE's inverse frequencies (rope.h rope_inv_freq of the config's scaling: Llama-3 scaling is
// folded in) as the float32 constant "rope.inv_freq" [head_dim / 2].
StatusOr<ir::ValueId> emit_rope_inv_freq(GraphEmitter& e, const ModelConfig& c);
// x [..., hd] (heads at `head_axis`, head_dim last) rotated by one Rope layer named `name` (ops.def:
// rotate_half pairs j and j + hd/2, angles positions * inv_freq in float32; formula in
// decoder_graph.h's build_rope_graph). `positions` (int64) has x's shape without the head and
// last axes.
ir::ValueId emit_rope(GraphEmitter& e, ir::ValueId inv_freq, ir::ValueId positions, ir::ValueId x, int64_t head_axis,
                      const std::string& name);

// The embeddings and every layer of the model: ids and positions (int64, the layout's token
// dims) -> the last layer's hidden states (before the final norm). Node names "embed*",
// "h.L.*" (GPT-2) / "layers.L.*" (Llama family), as the decoder graph has always had them.
StatusOr<ir::ValueId> emit_decoder_layers(GraphEmitter& e, CheckpointWeights& w, const ModelConfig& c,
                                          const std::string& prefix, ir::ValueId ids, ir::ValueId positions,
                                          TokenLayout& layout);

// The final norm ("ln_f" / "norm") and lm_head (the embedding when tied) on hidden states x
// [..., D]: the value named `logits_name`, float32 [..., vocab].
StatusOr<ir::ValueId> emit_lm_head(GraphEmitter& e, CheckpointWeights& w, const ModelConfig& c, const std::string& prefix,
                                   ir::ValueId x, const std::string& logits_name);

// ir::verify(g), as an internal error naming the graph.
Status verified(const ir::Graph& g);

}  // namespace kiln::llm
