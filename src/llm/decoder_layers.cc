// The decoder layers shared by the decoder graph and the step graph (see decoder_layers.h).
#include "llm/decoder_layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/numerics.h"
#include "core/parallel.h"
#include "core/transpose.h"
#include "ir/verifier.h"
#include "llm/rope.h"

namespace kiln::llm {

using ir::OpKind;
using ir::ValueId;

namespace {

constexpr int kOpset = 21;

ir::Dim known(int64_t v) { return ir::Dim::known(v); }

}  // namespace

ir::Attribute int_attr(int64_t v) { return ir::Attribute::of_int(v); }
ir::Attribute float_attr(double v) { return ir::Attribute::of_float(static_cast<float>(v)); }
ir::Attribute ints_attr(std::vector<int64_t> v) { return ir::Attribute::of_ints(std::move(v)); }

GraphEmitter::GraphEmitter(ir::Graph* g) : g_(g) { g_->opset_imports[""] = kOpset; }

ValueId GraphEmitter::input(const std::string& name, DataType dtype, ir::SymShape shape) {
  ValueId v = g_->add_value(name, dtype);
  g_->value(v).shape = std::move(shape);
  g_->inputs.push_back(v);
  return v;
}

ValueId GraphEmitter::constant(const std::string& name, Tensor t) {
  ValueId v = g_->add_value(name, t.dtype());
  ir::SymShape s;
  for (int64_t d : t.shape()) s.push_back(known(d));
  g_->value(v).shape = std::move(s);
  g_->value(v).constant = std::make_shared<Tensor>(std::move(t));
  return v;
}

ValueId GraphEmitter::ints(const std::string& name, const std::vector<int64_t>& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return constant(name, std::move(t));
}

ValueId GraphEmitter::op(OpKind kind, const std::string& name, std::vector<ValueId> in,
                         std::map<std::string, ir::Attribute> attrs, DataType out_dtype, const std::string& out_name) {
  ValueId out = g_->add_value(out_name.empty() ? name + ":0" : out_name, out_dtype);
  ir::Node n;
  n.name = name;
  n.op = kind;
  n.opset = kOpset;
  n.inputs = std::move(in);
  n.outputs = {out};
  n.attrs = std::move(attrs);
  g_->add_node(std::move(n));
  return out;
}

ValueId GraphEmitter::shared_ints(const std::string& key, const std::vector<int64_t>& v) {
  auto it = shared_.find(key);
  if (it != shared_.end()) return it->second;
  return shared_[key] = ints(key, v);
}

std::string CheckpointWeights::where(const std::string& name) const {
  return "weight '" + name + "' of checkpoint '" + ck_.dir() + "'";
}

StatusOr<ValueId> CheckpointWeights::as_is(const std::string& name) {
  KILN_ASSIGN_OR_RETURN(Tensor t, load(name));
  return e_->constant(name, std::move(t));
}

StatusOr<ValueId> CheckpointWeights::transposed(const std::string& name) {
  const SafetensorsTensor* st = ck_.find(name);
  if (!st) return invalid_model(where(name) + " is missing");
  // F32/F16/BF16 are converted and transposed in one pass; other dtypes (an FP8 checkpoint's
  // weight read as float) go through load() first.
  Tensor t = st->to_tensor();
  if (t.dtype() != DataType::kFloat32 && t.dtype() != DataType::kFloat16 && t.dtype() != DataType::kBFloat16) {
    KILN_ASSIGN_OR_RETURN(t, load(name));
  }
  if (t.rank() != 2) return invalid_model(where(name) + " is not 2-D");
  const int64_t r = t.dim(0), c = t.dim(1);
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(DataType::kFloat32, {c, r}, where(name) + " transposed"));
  transpose_to_float32(t.raw(), t.dtype(), r, c, 1.f, out.data<float>());
  return e_->constant(name + ".T", std::move(out));
}

StatusOr<LinearWeight> CheckpointWeights::linear(const std::string& module) {
  const std::string name = module + ".weight";
  const SafetensorsTensor* st = ck_.find(name);
  LinearWeight r;
  if (keep_fp8_ && st && st->dtype == DataType::kFloat8E4M3FN && ck_.fp8_quantization()) {
    StatusOr<Fp8Linear> l = read_fp8_linear(module, ck_.tensors(), *ck_.fp8_quantization());
    if (!l.ok()) return Status(l.status().code(), where(name) + ": " + l.status().message());
    r.fp8 = std::move(*l);
    return r;
  }
  KILN_ASSIGN_OR_RETURN(r.w, transposed(name));
  return r;
}

StatusOr<Tensor> CheckpointWeights::load(const std::string& name) {
  const SafetensorsTensor* st = ck_.find(name);
  if (!st) return invalid_model(where(name) + " is missing");
  Tensor raw = st->to_tensor();
  if (raw.dtype() == DataType::kFloat32) return raw;
  const std::string suffix = ".weight";
  if (raw.dtype() == DataType::kFloat8E4M3FN && ck_.fp8_quantization() && name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    // An FP8 checkpoint's linear weight read as float: W = fp8 · weight_scale.
    StatusOr<Fp8Linear> l = read_fp8_linear(name.substr(0, name.size() - suffix.size()), ck_.tensors(), *ck_.fp8_quantization());
    if (!l.ok()) return Status(l.status().code(), where(name) + ": " + l.status().message());
    return dequantize_fp8_linear(*l, where(name) + " dequantized");
  }
  if (raw.dtype() != DataType::kFloat16 && raw.dtype() != DataType::kBFloat16)
    return unsupported(where(name) + " has dtype " + dtype_name(raw.dtype()) + "; F32, F16 or BF16 are read");
  StatusOr<Tensor> f = cast_tensor(raw, DataType::kFloat32);
  if (!f.ok()) return Status(f.status().code(), where(name) + ": " + f.status().message());
  return f;
}

namespace {

enum class Act : uint8_t { kGeluTanh, kGeluErf, kRelu, kSilu };

StatusOr<Act> activation(const ModelConfig& c) {
  const std::string& a = c.hidden_act;
  if (a == "gelu_new" || a == "gelu_pytorch_tanh" || a == "gelu_fast") return Act::kGeluTanh;
  if (a == "gelu") return Act::kGeluErf;
  if (a == "relu") return Act::kRelu;
  if (a == "silu" || a == "swish") return Act::kSilu;
  return unsupported(std::string(architecture_name(c.architecture)) + " config: activation '" + a +
                     "' is not supported (gelu_new, gelu_pytorch_tanh, gelu_fast, gelu, relu, silu, swish are)");
}

ValueId emit_act(GraphEmitter& e, Act act, ValueId x, const std::string& name) {
  switch (act) {
    case Act::kGeluTanh: return e.op(OpKind::kGelu, name, {x}, {{"approximate", ir::Attribute::of_string("tanh")}});
    case Act::kGeluErf: return e.op(OpKind::kGelu, name, {x});
    case Act::kRelu: return e.op(OpKind::kRelu, name, {x});
    case Act::kSilu: {  // silu(x) = x · sigmoid(x)
      ValueId s = e.op(OpKind::kSigmoid, name + ".sigmoid", {x});
      return e.op(OpKind::kMul, name, {x, s});
    }
  }
  return x;
}

// y = x W (+ b): x [..., in], W [in, out] -> [..., out]. A projection named in the emitter's
// fp8_x_scales becomes QuantLinear(x, Wq [out, in] float8e4m3fn, w_scale [out], b?){x_scale}
// (ops.def), the bias kept float; W's float constant is then left unread (plans drop it). With
// per-tensor weight scales, `group_amax` is the amax of the weights that share x (fp8_group_amax:
// q/k/v, gate/up), so the horizontally fused layer keeps a single scalar scale; -1 for a layer of
// its own (its own amax).
ValueId linear(GraphEmitter& e, ValueId x, ValueId w, ValueId b, const std::string& name, double group_amax = -1) {
  if (const std::map<std::string, float>* scales = e.fp8_x_scales()) {
    auto it = scales->find(name);
    const std::shared_ptr<const Tensor>& wt = e.graph().value(w).constant;
    if (it != scales->end() && wt) {
      // quantize_weight_fp8 raises a per-tensor amax to W's own, so 0 stands for "W's amax".
      const double amax = e.fp8_per_tensor_weights() ? std::max(group_amax, 0.0) : -1;
      StatusOr<Fp8Weight> q = quantize_weight_fp8(*wt, name, amax);
      if (!q.ok()) {
        e.fail(q.status());
        return x;
      }
      std::vector<ValueId> in = {x, e.constant(name + ".weight_fp8", std::move(q->w)),
                                 e.constant(name + ".w_scale", std::move(q->scale))};
      if (b != ir::kNoValue) in.push_back(b);
      return e.op(OpKind::kQuantLinear, name, std::move(in),
                  {{"x_scale", ir::Attribute::of_float(it->second)}, {"x_zero_point", int_attr(0)}});
    }
  }
  ValueId y = e.op(OpKind::kMatMul, name, {x, w});
  return b == ir::kNoValue ? y : e.op(OpKind::kAdd, name + ".bias", {y, b});
}

// The same for a LinearWeight: an FP8 checkpoint's layer kept as stored is QuantLinear(x, W
// [out, in] as stored (or requantized by share_input), w_scale [out], b?){x_scale = input_scale}.
ValueId linear(GraphEmitter& e, ValueId x, const LinearWeight& lw, ValueId b, const std::string& name,
               double group_amax = -1) {
  if (!lw.fp8) return linear(e, x, lw.w, b, name, group_amax);
  std::vector<ValueId> in = {x, e.constant(name + ".weight_fp8", lw.fp8->w), e.constant(name + ".w_scale", lw.fp8->w_scale)};
  if (b != ir::kNoValue) in.push_back(b);
  return e.op(OpKind::kQuantLinear, name, std::move(in),
              {{"x_scale", ir::Attribute::of_float(lw.fp8->x_scale)}, {"x_zero_point", int_attr(0)}});
}

// The common amax of float weights that read one input, for their per-tensor FP8 scale (linear's
// group_amax): computed once per group, and only when the emitter quantizes per tensor (-1 else).
double fp8_group_amax(const GraphEmitter& e, std::initializer_list<ValueId> weights) {
  if (!e.fp8_x_scales() || !e.fp8_per_tensor_weights()) return -1;
  double amax = 0;
  for (ValueId w : weights)
    if (w != ir::kNoValue)
      if (const std::shared_ptr<const Tensor>& t = e.graph().value(w).constant) amax = std::max(amax, max_abs_weight(*t));
  return amax;
}

// Layers of one input (q/k/v, gate/up) kept FP8: one x_scale, so the horizontally fused layer
// quantizes the input once, and with the emitter's per-tensor weight scales one scalar weight
// scale too (share_fp8_input; decision 0086).
void share_input(const GraphEmitter& e, std::initializer_list<LinearWeight*> group) {
  std::vector<Fp8Linear*> f;
  for (LinearWeight* w : group)
    if (w->fp8) f.push_back(&*w->fp8);
  if (f.size() > 1) share_fp8_input(f, e.fp8_per_tensor_weights());
}

StatusOr<ValueId> emit_gpt2(GraphEmitter& e, CheckpointWeights& w, const ModelConfig& c, const std::string& p,
                            ValueId ids, ValueId positions, TokenLayout& layout) {
  KILN_ASSIGN_OR_RETURN(Act act, activation(c));
  const int64_t D = c.hidden_size, H = c.num_heads, hd = c.head_dim;
  KILN_ASSIGN_OR_RETURN(ValueId wte, w.as_is(p + "wte.weight"));
  KILN_ASSIGN_OR_RETURN(ValueId wpe, w.as_is(p + "wpe.weight"));
  ValueId tok = e.op(OpKind::kGather, "embed.tokens", {wte, ids}, {{"axis", int_attr(0)}});
  ValueId pos = e.op(OpKind::kGather, "embed.positions", {wpe, positions}, {{"axis", int_attr(0)}});
  ValueId x = e.op(OpKind::kAdd, "embed", {tok, pos});
  const std::map<std::string, ir::Attribute> ln_attrs = {{"axis", int_attr(-1)}, {"epsilon", float_attr(c.norm_eps)}};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string L = p + "h." + std::to_string(l) + ".";
    auto W = [&](const std::string& n) { return w.as_is(L + n); };
    KILN_ASSIGN_OR_RETURN(ValueId ln1_w, W("ln_1.weight"));
    KILN_ASSIGN_OR_RETURN(ValueId ln1_b, W("ln_1.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId qkv_w, W("attn.c_attn.weight"));
    KILN_ASSIGN_OR_RETURN(ValueId qkv_b, W("attn.c_attn.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId proj_w, W("attn.c_proj.weight"));
    KILN_ASSIGN_OR_RETURN(ValueId proj_b, W("attn.c_proj.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId ln2_w, W("ln_2.weight"));
    KILN_ASSIGN_OR_RETURN(ValueId ln2_b, W("ln_2.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId fc_w, W("mlp.c_fc.weight"));
    KILN_ASSIGN_OR_RETURN(ValueId fc_b, W("mlp.c_fc.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId fc2_w, W("mlp.c_proj.weight"));
    KILN_ASSIGN_OR_RETURN(ValueId fc2_b, W("mlp.c_proj.bias"));
    const std::string n = "h." + std::to_string(l);
    ValueId h = e.op(OpKind::kLayerNormalization, n + ".ln_1", {x, ln1_w, ln1_b}, ln_attrs);
    ValueId qkv = linear(e, h, qkv_w, qkv_b, n + ".attn.c_attn");
    // c_attn's output columns are [q | k | v], each D wide (GPT2Attention splits at n_embd).
    ValueId axis = e.shared_ints("qkv.axis", {layout.hidden_rank() - 1});
    auto part = [&](int i, const char* what) {
      ValueId s = e.op(OpKind::kSlice, n + ".attn." + what, {qkv, e.shared_ints("qkv.start." + std::to_string(i), {i * D}),
                                                               e.shared_ints("qkv.end." + std::to_string(i), {(i + 1) * D}), axis});
      return layout.split_heads(e, s, H, hd, n + ".attn." + what);
    };
    ValueId q = part(0, "q"), k = part(1, "k"), v = part(2, "v");
    ValueId a = layout.attend(e, c, l, q, k, v, n + ".attn");
    x = e.op(OpKind::kAdd, n + ".attn.residual", {x, linear(e, a, proj_w, proj_b, n + ".attn.c_proj")});
    h = e.op(OpKind::kLayerNormalization, n + ".ln_2", {x, ln2_w, ln2_b}, ln_attrs);
    ValueId f = emit_act(e, act, linear(e, h, fc_w, fc_b, n + ".mlp.c_fc"), n + ".mlp.act");
    x = e.op(OpKind::kAdd, n + ".mlp.residual", {x, linear(e, f, fc2_w, fc2_b, n + ".mlp.c_proj")});
  }
  return x;
}

StatusOr<ValueId> emit_llama(GraphEmitter& e, CheckpointWeights& w, const ModelConfig& c, ValueId ids,
                             ValueId positions, TokenLayout& layout) {
  KILN_ASSIGN_OR_RETURN(Act act, activation(c));
  const int64_t H = c.num_heads, KV = c.num_kv_heads, hd = c.head_dim;
  KILN_ASSIGN_OR_RETURN(ValueId embed, w.as_is("model.embed_tokens.weight"));
  ValueId x = e.op(OpKind::kGather, "embed.tokens", {embed, ids}, {{"axis", int_attr(0)}});
  KILN_ASSIGN_OR_RETURN(ValueId inv_freq, emit_rope_inv_freq(e, c));
  const std::map<std::string, ir::Attribute> rms_attrs = {{"axis", int_attr(-1)}, {"epsilon", float_attr(c.norm_eps)}};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    const std::string n = "layers." + std::to_string(l);
    auto P = [&](const std::string& module) { return w.linear(L + module); };
    auto B = [&](bool has, const std::string& name) -> StatusOr<ValueId> {
      if (!has) return ir::kNoValue;
      return w.as_is(L + name);
    };
    KILN_ASSIGN_OR_RETURN(ValueId in_norm, w.as_is(L + "input_layernorm.weight"));
    KILN_ASSIGN_OR_RETURN(ValueId post_norm, w.as_is(L + "post_attention_layernorm.weight"));
    KILN_ASSIGN_OR_RETURN(LinearWeight wq, P("self_attn.q_proj"));
    KILN_ASSIGN_OR_RETURN(LinearWeight wk, P("self_attn.k_proj"));
    KILN_ASSIGN_OR_RETURN(LinearWeight wv, P("self_attn.v_proj"));
    KILN_ASSIGN_OR_RETURN(LinearWeight wo, P("self_attn.o_proj"));
    KILN_ASSIGN_OR_RETURN(ValueId bq, B(c.attention_bias, "self_attn.q_proj.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId bk, B(c.attention_bias, "self_attn.k_proj.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId bv, B(c.attention_bias, "self_attn.v_proj.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId bo, B(c.attention_out_bias, "self_attn.o_proj.bias"));
    KILN_ASSIGN_OR_RETURN(LinearWeight wg, P("mlp.gate_proj"));
    KILN_ASSIGN_OR_RETURN(LinearWeight wu, P("mlp.up_proj"));
    KILN_ASSIGN_OR_RETURN(LinearWeight wd, P("mlp.down_proj"));
    KILN_ASSIGN_OR_RETURN(ValueId bg, B(c.mlp_bias, "mlp.gate_proj.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId bu, B(c.mlp_bias, "mlp.up_proj.bias"));
    KILN_ASSIGN_OR_RETURN(ValueId bd, B(c.mlp_bias, "mlp.down_proj.bias"));

    ValueId h = e.op(OpKind::kRMSNormalization, n + ".input_layernorm", {x, in_norm}, rms_attrs);
    share_input(e, {&wq, &wk, &wv});
    share_input(e, {&wg, &wu});
    const double qkv = fp8_group_amax(e, {wq.w, wk.w, wv.w}), gate_up = fp8_group_amax(e, {wg.w, wu.w});
    ValueId q = layout.split_heads(e, linear(e, h, wq, bq, n + ".q_proj", qkv), H, hd, n + ".q");
    ValueId k = layout.split_heads(e, linear(e, h, wk, bk, n + ".k_proj", qkv), KV, hd, n + ".k");
    ValueId v = layout.split_heads(e, linear(e, h, wv, bv, n + ".v_proj", qkv), KV, hd, n + ".v");
    q = emit_rope(e, inv_freq, positions, q, layout.head_axis(), n + ".q.rope");
    k = emit_rope(e, inv_freq, positions, k, layout.head_axis(), n + ".k.rope");
    ValueId a = layout.attend(e, c, l, q, k, v, n + ".attn");
    x = e.op(OpKind::kAdd, n + ".attn.residual", {x, linear(e, a, wo, bo, n + ".o_proj")});
    h = e.op(OpKind::kRMSNormalization, n + ".post_attention_layernorm", {x, post_norm}, rms_attrs);
    ValueId g = emit_act(e, act, linear(e, h, wg, bg, n + ".gate_proj", gate_up), n + ".act");
    ValueId u = linear(e, h, wu, bu, n + ".up_proj", gate_up);
    ValueId m = e.op(OpKind::kMul, n + ".gate_up", {g, u});
    x = e.op(OpKind::kAdd, n + ".mlp.residual", {x, linear(e, m, wd, bd, n + ".down_proj")});
  }
  return x;
}

}  // namespace

std::vector<Projection> decoder_projections(const ModelConfig& c) {
  std::vector<Projection> out;
  const int64_t D = c.hidden_size, I = c.intermediate_size;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.architecture == Architecture::kGpt2) {
      const std::string n = "h." + std::to_string(l);
      out.push_back({n + ".attn.c_attn", D, 3 * D, n + ".attn.c_attn"});
      out.push_back({n + ".attn.c_proj", D, D, n + ".attn.c_proj"});
      out.push_back({n + ".mlp.c_fc", D, I, n + ".mlp.c_fc"});
      out.push_back({n + ".mlp.c_proj", I, D, n + ".mlp.c_proj"});
    } else {
      const std::string n = "layers." + std::to_string(l), m = "model.layers." + std::to_string(l);
      out.push_back({n + ".q_proj", D, q, m + ".self_attn.q_proj"});
      out.push_back({n + ".k_proj", D, kv, m + ".self_attn.k_proj"});
      out.push_back({n + ".v_proj", D, kv, m + ".self_attn.v_proj"});
      out.push_back({n + ".o_proj", q, D, m + ".self_attn.o_proj"});
      out.push_back({n + ".gate_proj", D, I, m + ".mlp.gate_proj"});
      out.push_back({n + ".up_proj", D, I, m + ".mlp.up_proj"});
      out.push_back({n + ".down_proj", I, D, m + ".mlp.down_proj"});
    }
  }
  return out;
}

double max_abs_weight(const Tensor& w) {
  if (w.dtype() != DataType::kFloat32) return 0;
  const float* v = w.data<float>();
  const int64_t n = w.numel();
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<double> part(static_cast<size_t>((n + kChunk - 1) / kChunk), 0.0);
  parallel_for(static_cast<int64_t>(part.size()), n, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      float m = 0;  // |v| of a finite float is exact in float
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i)
        if (std::isfinite(v[i])) m = std::max(m, std::fabs(v[i]));
      part[static_cast<size_t>(c)] = m;
    }
  });
  double m = 0;
  for (double p : part) m = std::max(m, p);
  return m;
}

StatusOr<Fp8Weight> quantize_weight_fp8(const Tensor& w, const std::string& name, double tensor_amax) {
  if (w.rank() != 2 || w.dtype() != DataType::kFloat32)
    return invalid_argument("fp8 weight of projection '" + name + "': expected a 2-D float32 [K, N] matrix");
  const int64_t K = w.dim(0), N = w.dim(1);
  const float* src = w.data<float>();
  Fp8Weight r;
  KILN_ASSIGN_OR_RETURN(r.w, Tensor::allocate(DataType::kFloat8E4M3FN, {N, K}, "fp8 weight of projection '" + name + "'"));
  r.scale = Tensor(DataType::kFloat32, {N});
  // Columns in blocks of 64 on several threads (an 8B model's projections are 7e9 weights): each
  // block reads 64 contiguous floats of every row and writes 64 rows of Wq.
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (N + kBlock - 1) / kBlock;
  std::vector<double> amax(static_cast<size_t>(N), 0.0);
  std::vector<int64_t> bad(static_cast<size_t>(blocks), -1);  // first non-finite index (k * N + n) per block
  parallel_for(blocks, K * N, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * kBlock, n1 = std::min(N, n0 + kBlock);
      for (int64_t k = 0; k < K && bad[static_cast<size_t>(b)] < 0; ++k)
        for (int64_t n = n0; n < n1; ++n) {
          const float v = src[k * N + n];
          if (!std::isfinite(v)) {
            bad[static_cast<size_t>(b)] = k * N + n;
            break;
          }
          amax[static_cast<size_t>(n)] = std::max(amax[static_cast<size_t>(n)], static_cast<double>(std::fabs(v)));
        }
    }
  });
  int64_t first_bad = -1;
  for (int64_t i : bad)
    if (i >= 0 && (first_bad < 0 || i < first_bad)) first_bad = i;
  if (first_bad >= 0)
    return invalid_argument("fp8 weight of projection '" + name + "': non-finite value at [" + std::to_string(first_bad / N) +
                            ", " + std::to_string(first_bad % N) + "] (in x W layout)");
  if (tensor_amax >= 0) {  // one scale for the tensor (it must cover every channel's amax)
    for (int64_t n = 0; n < N; ++n) tensor_amax = std::max(tensor_amax, amax[n]);
    std::fill(amax.begin(), amax.end(), tensor_amax);
  }
  float* scale = r.scale.data<float>();
  for (int64_t n = 0; n < N; ++n) scale[n] = amax[n] > 0 ? static_cast<float>(amax[n] / 448.0) : 1.f;
  uint8_t* dst = r.w.data<uint8_t>();
  parallel_for(blocks, K * N, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * kBlock, n1 = std::min(N, n0 + kBlock);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = n0; n < n1; ++n)
          dst[n * K + k] = double_to_fp8e4m3fn(static_cast<double>(src[k * N + n]) / scale[n], /*saturate=*/true);
    }
  });
  return r;
}

StatusOr<ValueId> emit_rope_inv_freq(GraphEmitter& e, const ModelConfig& c) {
  KILN_ASSIGN_OR_RETURN(std::vector<float> inv, rope_inv_freq(c.rope, c.head_dim));
  Tensor t(DataType::kFloat32, {static_cast<int64_t>(inv.size())});
  for (size_t i = 0; i < inv.size(); ++i) t.data<float>()[i] = inv[i];
  return e.constant("rope.inv_freq", std::move(t));
}

ValueId emit_rope(GraphEmitter& e, ValueId inv_freq, ValueId positions, ValueId x, int64_t head_axis,
                  const std::string& name) {
  // One Rope layer (ops.def): angles position * inv_freq and their cos / sin in float32 inside the
  // kernel, rotate_half pairing (interleaved 0), every feature rotated (rotary_dim 0 = head_dim).
  return e.op(OpKind::kRope, name, {x, positions, inv_freq}, {{"head_axis", int_attr(head_axis)}});
}

StatusOr<ValueId> emit_decoder_layers(GraphEmitter& e, CheckpointWeights& w, const ModelConfig& c, const std::string& prefix,
                                      ValueId ids, ValueId positions, TokenLayout& layout) {
  if (c.architecture == Architecture::kGpt2) return emit_gpt2(e, w, c, prefix, ids, positions, layout);
  return emit_llama(e, w, c, ids, positions, layout);
}

StatusOr<ValueId> emit_lm_head(GraphEmitter& e, CheckpointWeights& w, const ModelConfig& c, const std::string& p, ValueId x,
                               const std::string& logits_name) {
  const std::map<std::string, ir::Attribute> norm_attrs = {{"axis", int_attr(-1)}, {"epsilon", float_attr(c.norm_eps)}};
  std::string embedding;
  if (c.architecture == Architecture::kGpt2) {
    KILN_ASSIGN_OR_RETURN(ValueId lnf_w, w.as_is(p + "ln_f.weight"));
    KILN_ASSIGN_OR_RETURN(ValueId lnf_b, w.as_is(p + "ln_f.bias"));
    x = e.op(OpKind::kLayerNormalization, "ln_f", {x, lnf_w, lnf_b}, norm_attrs);
    embedding = p + "wte.weight";  // GPT2LMHeadModel ties lm_head to wte unless tie_word_embeddings is false
  } else {
    KILN_ASSIGN_OR_RETURN(ValueId norm, w.as_is("model.norm.weight"));
    x = e.op(OpKind::kRMSNormalization, "norm", {x, norm}, norm_attrs);
    embedding = "model.embed_tokens.weight";
  }
  KILN_ASSIGN_OR_RETURN(ValueId head, w.transposed(c.tie_word_embeddings ? embedding : "lm_head.weight"));
  return e.op(OpKind::kMatMul, "lm_head", {x, head}, {}, DataType::kFloat32, logits_name);
}

Status verified(const ir::Graph& g) {
  Status s = ir::verify(g);
  if (!s.ok()) return internal_error("graph '" + g.name + "' fails verification: " + s.message());
  return Status::Ok();
}

}  // namespace kiln::llm
