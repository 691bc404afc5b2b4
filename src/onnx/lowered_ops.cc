// RMSNormalization-23, Attention-23/24 and RotaryEmbedding-23 (ONNX Operators.md) as Kiln
// layers, at import (docs/decisions/0066). Written from the operator specs of ONNX 1.18/1.19
// (Operators.md "Attention", "RMSNormalization", "RotaryEmbedding") and checked against their
// formulas in tests/unit/onnx_lowered_ops_test.cc.
#include "onnx/lowered_ops.h"

#include "ir/shape_inference.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <set>

namespace kiln::onnx_import {
namespace {

using ir::Attribute;
using ir::kNoValue;
using ir::sym_shape_str;
using ir::OpKind;
using ir::ValueId;

// Adds values and layers named after the ONNX node ("<node>/<what>").
class Emitter {
 public:
  Emitter(ir::Graph* g, const ir::Node& n) : g_(g), base_(n.name), opset_(n.opset) {}

  ValueId fresh(const std::string& what) {
    std::string name = base_ + "/" + what;
    for (int i = 1; g_->find_value(name) != kNoValue; ++i) name = base_ + "/" + what + "_" + std::to_string(i);
    return g_->add_value(name);
  }
  ValueId constant(const std::string& what, Tensor t) {
    ValueId v = fresh(what);
    ir::SymShape s;
    for (int64_t d : t.shape()) s.push_back(ir::Dim::known(d));
    g_->value(v).dtype = t.dtype();
    g_->value(v).shape = std::move(s);
    g_->value(v).constant = std::make_shared<Tensor>(std::move(t));
    return v;
  }
  ValueId ints(const std::string& what, const std::vector<int64_t>& v) {
    Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
    return constant(what, std::move(t));
  }
  // One layer with one output: `out`, or a fresh value when kNoValue. Returns the output.
  ValueId op(OpKind k, const std::string& what, std::vector<ValueId> in, std::map<std::string, Attribute> attrs = {},
             ValueId out = kNoValue) {
    if (out == kNoValue) out = fresh(what);
    return ops(k, what, std::move(in), std::move(attrs), {out})[0];
  }
  std::vector<ValueId> ops(OpKind k, const std::string& what, std::vector<ValueId> in,
                           std::map<std::string, Attribute> attrs, std::vector<ValueId> outs) {
    ir::Node m;
    m.name = base_ + "/" + what;
    for (int i = 1; !names_.insert(m.name).second; ++i) m.name = base_ + "/" + what + "_" + std::to_string(i);
    m.op = k;
    m.opset = opset_;
    m.inputs = std::move(in);
    m.outputs = outs;
    m.attrs = std::move(attrs);
    g_->add_node(std::move(m));
    return outs;
  }
  ValueId reshape(const std::string& what, ValueId x, const std::vector<int64_t>& shape, ValueId out = kNoValue) {
    return op(OpKind::kReshape, what, {x, ints(what + "_shape", shape)}, {}, out);
  }
  ValueId transpose(const std::string& what, ValueId x, std::vector<int64_t> perm, ValueId out = kNoValue) {
    return op(OpKind::kTranspose, what, {x}, {{"perm", Attribute::of_ints(std::move(perm))}}, out);
  }
  ValueId slice(const std::string& what, ValueId x, int64_t start, int64_t end, int64_t step = 1) {
    return op(OpKind::kSlice, what,
              {x, ints(what + "_starts", {start}), ints(what + "_ends", {end}), ints(what + "_axes", {-1}),
               ints(what + "_steps", {step})});
  }
  ValueId unsqueeze(const std::string& what, ValueId x, int64_t axis) {
    return op(OpKind::kUnsqueeze, what, {x, ints(what + "_axes", {axis})});
  }

 private:
  ir::Graph* g_;
  std::string base_;
  int opset_;
  std::set<std::string> names_;  // layer names given so far (unique within the node)
};

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

ValueId input(const ir::Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : kNoValue; }
ValueId output(const ir::Node& n, size_t i) { return i < n.outputs.size() ? n.outputs[i] : kNoValue; }

// Dims that are the same at run time: equal known extents, or one symbol.
bool same_dim(const ir::Dim& a, const ir::Dim& b) {
  return (a.is_known() && a.value == b.value) || (!a.symbol.empty() && a.symbol == b.symbol);
}

// The shapes of `vs` as the model declares them or, where one is not declared (the output of an
// earlier node), as shape inference over a copy of the graph imported so far gives them (errors
// there leave the dims it could not infer unknown; the builder infers the whole graph again).
std::vector<std::optional<ir::SymShape>> shapes_of(const ir::Graph& g, const std::vector<ValueId>& vs) {
  std::vector<std::optional<ir::SymShape>> r;
  bool missing = false;
  for (ValueId v : vs) {
    r.push_back(v == kNoValue ? std::nullopt : g.value(v).shape);
    missing = missing || (v != kNoValue && !r.back());
  }
  if (!missing) return r;
  ir::Graph tmp = g;
  (void)ir::infer_shapes(tmp);
  for (size_t i = 0; i < vs.size(); ++i)
    if (vs[i] != kNoValue && !r[i]) r[i] = tmp.value(vs[i]).shape;
  return r;
}

Status require_inputs(const ir::Node& n, const std::string& op, std::initializer_list<const char*> names) {
  size_t i = 0;
  for (const char* name : names) {
    if (input(n, i) == kNoValue)
      return invalid_model("node '" + n.name + "' (" + op + "): required input " + std::to_string(i) + " (" + name +
                           ") is missing");
    ++i;
  }
  return Status::Ok();
}

// RMSNormalization-23: Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * scale, computed
// in stash_type (1 = float32); scale broadcasts to X.shape[axis:]. Kiln's RMSNormalization layer
// (ops.def) computes exactly this when scale is one value or has exactly the normalized dims;
// any other broadcastable scale is applied by a Mul after a layer with scale 1 (x * 1 is exact).
Status lower_rms_norm(ir::Node n, ir::Graph* g) {
  const std::string at = "node '" + n.name + "' (RMSNormalization)";
  KILN_RETURN_IF_ERROR(require_inputs(n, "RMSNormalization", {"X", "scale"}));
  const int64_t stash = n.attr_int("stash_type", 1);
  if (stash != 1)
    return unsupported(at + ": stash_type=" + std::to_string(stash) +
                       " is not supported (Kiln computes RMSNormalization in float32: stash_type 1)");
  const ValueId x = input(n, 0), scale = input(n, 1);
  std::map<std::string, Attribute> attrs;
  for (const char* k : {"axis", "epsilon"})
    if (n.has_attr(k)) attrs[k] = n.attrs.at(k);
  const int64_t axis = n.attr_int("axis", -1);
  bool direct = false;
  const auto shapes = shapes_of(*g, {x, scale});
  if (const auto& ss = shapes[1]) {
    ir::SymShape sdims = *ss;
    bool one = true;
    for (const ir::Dim& d : sdims) one = one && d.is_known() && d.value == 1;
    const auto& xs = shapes[0];
    if (one) {
      direct = true;
    } else if (xs) {
      const int64_t r = static_cast<int64_t>(xs->size());
      const int64_t a = axis < 0 ? axis + r : axis;
      if (a < 0 || a >= r)
        return invalid_model(at + ": axis " + std::to_string(axis) + " is out of range for X of rank " + std::to_string(r));
      const ir::SymShape norm(xs->begin() + a, xs->end());
      while (!sdims.empty() && sdims.size() > norm.size() && sdims.front().is_known() && sdims.front().value == 1)
        sdims.erase(sdims.begin());
      direct = sdims.size() == norm.size();
      for (size_t i = 0; direct && i < norm.size(); ++i) direct = same_dim(sdims[i], norm[i]);
    } else {
      while (sdims.size() > 1 && sdims.front().is_known() && sdims.front().value == 1) sdims.erase(sdims.begin());
      direct = axis == -1 && sdims.size() == 1;  // the layer checks the last dim at run time
    }
  }
  Emitter e(g, n);
  if (direct) {
    e.op(OpKind::kRMSNormalization, "rms_norm", {x, scale}, attrs, output(n, 0));
    return Status::Ok();
  }
  const ValueId one = e.op(OpKind::kCastLike, "one", {e.constant("one_f32", Tensor::scalar<float>(DataType::kFloat32, 1.f)), x});
  const ValueId normed = e.op(OpKind::kRMSNormalization, "rms_norm", {x, one}, attrs);
  e.op(OpKind::kMul, "scale", {normed, scale}, {}, output(n, 0));
  return Status::Ok();
}

// Attention-23/24. Inputs Q, K, V (4-D [B, H, S, D], or 3-D [B, S, H * D] with q_num_heads /
// kv_num_heads), attn_mask? (bool: true = attend; or float, added to the scores; broadcast to
// [B, Hq, Sq, P + Skv]), past_key? / past_value? ([B, Hkv, P, D]: concatenated before K / V on the
// sequence axis; present_key / present_value = those concatenations). is_causal: query i sees
// key j iff j <= i + P (the mask aligned to the past length). Kiln's layer (ops.def, docs/
// decisions/0006) excludes j > i + Sk - Sq with Sk = P + Skv: the same rule exactly when
// Skv == Sq, else an explicit mask is built (static shapes only). GQA: query head h reads kv
// head h / (Hq / Hkv) in both. Scale default 1/sqrt(D) in both.
Status lower_attention(ir::Node n, ir::Graph* g) {
  const std::string at = "node '" + n.name + "' (Attention)";
  KILN_RETURN_IF_ERROR(require_inputs(n, "Attention", {"Q", "K", "V"}));
  const float softcap = n.attr_float("softcap", 0.f);
  if (softcap != 0.f)
    return unsupported(at + ": attribute softcap=" + std::to_string(softcap) +
                       " is not supported (Kiln's Attention layer has no soft cap; only softcap=0)");
  if (output(n, 3) != kNoValue)
    return unsupported(at + ": output 3 (qk_matmul_output, qk_matmul_output_mode=" +
                       std::to_string(n.attr_int("qk_matmul_output_mode", 0)) +
                       ") is not supported (Kiln's Attention layer does not expose its scores)");
  if (n.has_attr("softmax_precision")) {
    const int64_t p = n.attr_int("softmax_precision", 1);
    // Kiln's softmax runs in float32 (float64 for float64 inputs): at least float, float16, bfloat16.
    if (p != 1 && p != 10 && p != 16)
      return unsupported(at + ": attribute softmax_precision=" + std::to_string(p) +
                         " is not supported (Kiln computes the softmax in float32: 1, 10 or 16)");
  }
  const ValueId q = input(n, 0), k = input(n, 1), v = input(n, 2), mask = input(n, 3);
  const ValueId past_k = input(n, 4), past_v = input(n, 5);
  if ((past_k == kNoValue) != (past_v == kNoValue))
    return invalid_model(at + ": past_key and past_value must be given together");
  // Copies: emitting layers adds values (and may move g->values).
  const auto shapes = shapes_of(*g, {q, k, v, past_k, mask});
  const std::optional<ir::SymShape> &qs = shapes[0], &ks = shapes[1];
  const bool heads_attrs = n.has_attr("q_num_heads") && n.has_attr("kv_num_heads");
  const size_t rank = qs ? qs->size() : (heads_attrs ? 3 : 4);
  if (rank != 3 && rank != 4)
    return invalid_model(at + ": Q has rank " + std::to_string(rank) +
                         "; Attention takes 4-D [B, H, S, D] or 3-D [B, S, H * D] inputs");
  for (size_t i : {size_t{1}, size_t{2}})
    if (const auto& s = shapes[i]; s && s->size() != rank)
      return invalid_model(at + ": Q, K and V must have one rank, got Q " + (qs ? sym_shape_str(*qs) : "?") + ", '" +
                           g->value(i == 1 ? k : v).name + "' " + sym_shape_str(*s));
  const int64_t hq = n.attr_int("q_num_heads", 0), hkv = n.attr_int("kv_num_heads", 0);
  if (rank == 3 && (hq <= 0 || hkv <= 0))
    return invalid_model(at + ": 3-D Q/K/V need q_num_heads and kv_num_heads > 0 (got " + std::to_string(hq) + ", " +
                         std::to_string(hkv) + ")");
  Emitter e(g, n);
  ValueId q4 = q, k4 = k, v4 = v;
  if (rank == 3) {  // [B, S, H * D] -> [B, S, H, D] -> [B, H, S, D]
    q4 = e.transpose("q_bhsd", e.reshape("q_bshd", q, {0, 0, hq, -1}), {0, 2, 1, 3});
    k4 = e.transpose("k_bhsd", e.reshape("k_bshd", k, {0, 0, hkv, -1}), {0, 2, 1, 3});
    v4 = e.transpose("v_bhsd", e.reshape("v_bshd", v, {0, 0, hkv, -1}), {0, 2, 1, 3});
  }
  const Attribute axis2 = Attribute::of_int(2);
  ValueId kf = k4, vf = v4;
  if (past_k != kNoValue) {
    kf = e.op(OpKind::kConcat, "present_key", {past_k, k4}, {{"axis", axis2}}, output(n, 1));
    vf = e.op(OpKind::kConcat, "present_value", {past_v, v4}, {{"axis", axis2}}, output(n, 2));
  } else {
    if (output(n, 1) != kNoValue) e.op(OpKind::kIdentity, "present_key", {k4}, {}, output(n, 1));
    if (output(n, 2) != kNoValue) e.op(OpKind::kIdentity, "present_value", {v4}, {}, output(n, 2));
  }
  std::map<std::string, Attribute> attrs;
  if (n.has_attr("scale")) attrs["scale"] = n.attrs.at("scale");
  ValueId m = mask;
  // A mask shorter than the P + Skv keys is padded with excluded keys (false / -inf), as ONNX's
  // reference does (Operators.md: attn_mask's last dim may be less than total_sequence_length),
  // where the shapes are static; otherwise the layer's broadcast check decides at build time.
  if (mask != kNoValue && shapes[4] && !shapes[4]->empty() && ks && (past_k == kNoValue || shapes[3])) {
    const ir::SymShape& ms = *shapes[4];
    const ir::Dim skv_dim = (*ks)[rank == 3 ? 1 : 2];
    const ir::Dim p_dim = past_k == kNoValue ? ir::Dim::known(0) : ((*shapes[3]).size() == 4 ? (*shapes[3])[2] : ir::Dim{});
    bool known = skv_dim.is_known() && p_dim.is_known();
    int64_t elems = 1;
    for (const ir::Dim& d : ms) {
      known = known && d.is_known() && d.value <= (int64_t{1} << 26);
      if (known) elems *= std::max<int64_t>(d.value, 1);
      known = known && elems <= (int64_t{1} << 26);
    }
    const DataType mdt = g->value(mask).dtype;
    if (known && mdt != DataType::kUndefined && ms.back().value < p_dim.value + skv_dim.value &&
        p_dim.value + skv_dim.value <= (int64_t{1} << 26)) {
      Shape pad_shape;
      for (const ir::Dim& d : ms) pad_shape.push_back(d.value);
      pad_shape.back() = p_dim.value + skv_dim.value - ms.back().value;
      if (shape_numel(pad_shape) > (int64_t{1} << 26))
        return unsupported(at + ": padding attn_mask to the total key length needs more than 2^26 elements");
      ValueId filler;
      if (mdt == DataType::kBool) {
        KILN_ASSIGN_OR_RETURN(Tensor f, Tensor::allocate(DataType::kBool, pad_shape, at + " mask padding"));
        filler = e.constant("mask_pad", std::move(f));  // zero-filled: false, the keys are excluded
      } else {
        KILN_ASSIGN_OR_RETURN(Tensor f, Tensor::allocate(DataType::kFloat32, pad_shape, at + " mask padding"));
        for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = -std::numeric_limits<float>::infinity();
        filler = e.op(OpKind::kCastLike, "mask_pad", {e.constant("mask_pad_f32", std::move(f)), mask});
      }
      m = e.op(OpKind::kConcat, "mask_padded", {mask, filler}, {{"axis", Attribute::of_int(-1)}});
    }
  }
  const ValueId nonpad = input(n, 6);
  // Opset 24's nonpad_kv_seqlen [B] without a past: the causal frontier is per batch row.
  const bool causal = n.attr_int("is_causal", 0) != 0;
  const bool causal_per_row = causal && nonpad != kNoValue && past_k == kNoValue;
  if (causal && !causal_per_row) {
    const size_t sx = rank == 3 ? 1 : 2;  // the sequence axis of Q and K
    const std::optional<ir::Dim> sq = qs ? std::optional<ir::Dim>((*qs)[sx]) : std::nullopt;
    const std::optional<ir::Dim> skv = ks ? std::optional<ir::Dim>((*ks)[sx]) : std::nullopt;
    if (sq && skv && same_dim(*sq, *skv)) {
      attrs["is_causal"] = Attribute::of_int(1);  // j > i + P + Skv - Sq = i + P: the same rule
    } else {
      int64_t p = 0;
      if (past_k != kNoValue) {
        const std::optional<ir::SymShape>& ps = shapes[3];
        p = ps && ps->size() == 4 && (*ps)[2].is_known() ? (*ps)[2].value : -1;
      }
      if (!sq || !skv || !sq->is_known() || !skv->is_known() || p < 0)
        return unsupported(at + ": is_causal=1 where the query length (" + (sq ? sym_shape_str({*sq}) : "?") +
                           ") may differ from the new keys' length (" + (skv ? sym_shape_str({*skv}) : "?") +
                           "): ONNX aligns the causal mask to the past length, Kiln's layer to the last key; "
                           "this needs static Q, K and past_key sequence lengths");
      // keep[i][j] = j <= i + P over the scores' last two dims [Sq, P + Skv]; a constant, so its
      // size is bounded (a model's static dims may be anything).
      constexpr int64_t kMaxMask = int64_t{1} << 26;
      if (sq->value > kMaxMask || skv->value > kMaxMask || p > kMaxMask ||
          sq->value * (p + skv->value) > kMaxMask)
        return unsupported(at + ": is_causal=1 with Sq != Skv needs a constant causal mask of " +
                           std::to_string(sq->value) + " x " + std::to_string(p + skv->value) +
                           " elements, more than Kiln builds at import (2^26)");
      const int64_t rows = sq->value, cols = p + skv->value;
      KILN_ASSIGN_OR_RETURN(Tensor causal, Tensor::allocate(DataType::kBool, {rows, cols}, at + " causal mask"));
      auto* c = static_cast<uint8_t*>(causal.raw());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) c[i * cols + j] = j <= i + p;
      const ValueId cm = e.constant("causal_mask", std::move(causal));
      const ValueId user_mask = m;
      if (mask != kNoValue && g->value(mask).dtype == DataType::kUndefined)
        return unsupported(at + ": is_causal=1 with Sq != Skv and an attn_mask '" + g->value(mask).name +
                           "' whose dtype the model does not declare (bool and float masks combine differently "
                           "with the causal mask; give it a value_info)");
      if (mask == kNoValue) {
        m = cm;
      } else if (g->value(mask).dtype == DataType::kBool) {
        m = e.op(OpKind::kAnd, "mask_and_causal", {user_mask, cm});
      } else {  // float mask: -inf where the causal rule excludes the key (spec: added to the mask)
        Tensor neg(DataType::kFloat32, {});
        *neg.data<float>() = -std::numeric_limits<float>::infinity();
        const ValueId zero = e.op(OpKind::kCastLike, "zero", {e.constant("zero_f32", Tensor::scalar<float>(DataType::kFloat32, 0.f)), mask});
        const ValueId ninf = e.op(OpKind::kCastLike, "neg_inf", {e.constant("neg_inf_f32", std::move(neg)), mask});
        m = e.op(OpKind::kAdd, "mask_plus_causal", {user_mask, e.op(OpKind::kWhere, "causal_bias", {cm, zero, ninf})});
      }
    }
  }
  if (nonpad != kNoValue) {
    // Attention-24: key j of batch row b is kept iff j < nonpad_kv_seqlen[b]; with is_causal and
    // no past_key also iff j <= i + nonpad_kv_seqlen[b] - Sq (ONNX's reference: the frontier of an
    // external cache). Built from the run-time shapes: keep [B, 1, 1 | Sq, P + Skv].
    const ValueId two = e.constant("axis2", Tensor::scalar<int64_t>(DataType::kInt64, 2));
    const ValueId zero_i = e.constant("zero_i64", Tensor::scalar<int64_t>(DataType::kInt64, 0));
    const ValueId one_i = e.constant("one_i64", Tensor::scalar<int64_t>(DataType::kInt64, 1));
    const ValueId total = e.op(OpKind::kGather, "total_keys", {e.op(OpKind::kShape, "keys_shape", {kf}), two}, {{"axis", Attribute::of_int(0)}});
    const ValueId key_idx = e.op(OpKind::kRange, "key_index", {zero_i, total, one_i});  // [T]
    const ValueId nb = e.op(OpKind::kUnsqueeze, "nonpad_b111", {nonpad, e.ints("nonpad_axes", {1, 2, 3})});
    ValueId keep = e.op(OpKind::kLess, "keep_nonpad", {key_idx, nb});  // [B, 1, 1, T]
    if (causal_per_row) {
      const ValueId sq_len = e.op(OpKind::kGather, "query_len", {e.op(OpKind::kShape, "query_shape", {q4}), two}, {{"axis", Attribute::of_int(0)}});
      const ValueId q_idx = e.unsqueeze("query_index_col", e.op(OpKind::kRange, "query_index", {zero_i, sq_len, one_i}), 1);
      const ValueId rel = e.op(OpKind::kSub, "key_minus_query", {key_idx, q_idx});  // [Sq, T]: j - i
      const ValueId lim = e.op(OpKind::kSub, "causal_limit", {nb, sq_len});        // [B, 1, 1, 1]
      keep = e.op(OpKind::kAnd, "keep_causal", {keep, e.op(OpKind::kLessOrEqual, "causal_rows", {rel, lim})});
    }
    // m is the model's mask (maybe padded or combined with a causal mask: its dtype) or the
    // bool causal constant.
    const DataType mdt = mask != kNoValue ? g->value(mask).dtype : DataType::kBool;
    if (m == kNoValue) {
      m = keep;
    } else if (mdt == DataType::kBool) {
      m = e.op(OpKind::kAnd, "mask_and_nonpad", {m, keep});
    } else if (mdt == DataType::kUndefined) {
      return unsupported(at + ": nonpad_kv_seqlen with an attn_mask '" + g->value(mask).name +
                         "' whose dtype the model does not declare (give it a value_info)");
    } else {
      Tensor neg(DataType::kFloat32, {});
      *neg.data<float>() = -std::numeric_limits<float>::infinity();
      const ValueId zero = e.op(OpKind::kCastLike, "pad_zero", {e.constant("pad_zero_f32", Tensor::scalar<float>(DataType::kFloat32, 0.f)), m});
      const ValueId ninf = e.op(OpKind::kCastLike, "pad_neg_inf", {e.constant("pad_neg_inf_f32", std::move(neg)), m});
      m = e.op(OpKind::kAdd, "mask_plus_nonpad", {m, e.op(OpKind::kWhere, "nonpad_bias", {keep, zero, ninf})});
    }
  }
  std::vector<ValueId> ins = {q4, kf, vf};
  if (m != kNoValue) ins.push_back(m);
  if (rank == 4) {
    e.op(OpKind::kAttention, "sdpa", ins, attrs, output(n, 0));
  } else {  // [B, Hq, Sq, Dv] -> [B, Sq, Hq, Dv] -> [B, Sq, Hq * Dv]
    const ValueId y4 = e.op(OpKind::kAttention, "sdpa", ins, attrs);
    e.reshape("y", e.transpose("y_bshd", y4, {0, 2, 1, 3}), {0, 0, -1}, output(n, 0));
  }
  return Status::Ok();
}

// RotaryEmbedding-23. X: 4-D [B, H, S, D] or 3-D [B, S, H * D] (num_heads); cos_cache /
// sin_cache: [max_pos, R/2] read at position_ids [B, S], or [B, S, R/2] without position_ids;
// R = rotary_embedding_dim (0: D). The first R features rotate: x1, x2 = halves of them
// (interleaved=0) or their even / odd entries (interleaved=1); real = cos x1 - sin x2,
// imag = sin x1 + cos x2, written back in the same places; features R.. pass through. With
// position_ids: one Rope layer (cache mode); without: Unsqueeze / Slice / Mul / Sub / Add / Concat layers.
Status lower_rotary_embedding(ir::Node n, ir::Graph* g) {
  const std::string at = "node '" + n.name + "' (RotaryEmbedding)";
  KILN_RETURN_IF_ERROR(require_inputs(n, "RotaryEmbedding", {"X", "cos_cache", "sin_cache"}));
  const ValueId x = input(n, 0), cos_c = input(n, 1), sin_c = input(n, 2), pos = input(n, 3);
  const bool interleaved = n.attr_int("interleaved", 0) != 0;
  const int64_t rdim = n.attr_int("rotary_embedding_dim", 0), nh = n.attr_int("num_heads", 0);
  if (rdim < 0 || rdim % 2 != 0)
    return invalid_model(at + ": rotary_embedding_dim " + std::to_string(rdim) + " must be even and >= 0");
  const std::optional<ir::SymShape> xs = shapes_of(*g, {x})[0];
  const size_t rank = xs ? xs->size() : (nh > 0 ? 3 : 4);
  if (rank != 3 && rank != 4)
    return invalid_model(at + ": X has rank " + std::to_string(rank) + "; RotaryEmbedding takes 4-D [B, H, S, D] or "
                         "3-D [B, S, H * D]");
  if (rank == 3 && nh <= 0)
    return invalid_model(at + ": 3-D X needs num_heads > 0 (got " + std::to_string(nh) + ")");
  // The head size D where the shapes say it (for leaving out an empty pass-through part).
  std::optional<int64_t> head;
  if (xs && xs->back().is_known())
    head = rank == 4 ? xs->back().value : (xs->back().value % nh == 0 ? std::optional<int64_t>(xs->back().value / nh) : std::nullopt);
  if (head && rdim > *head)
    return invalid_model(at + ": rotary_embedding_dim " + std::to_string(rdim) + " exceeds the head size " +
                         std::to_string(*head));
  Emitter e(g, n);
  // 4-D X stays [B, H, S, D] (caches unsqueezed at axis 1); 3-D X becomes [B, S, H, D] (axis 2).
  const ValueId x4 = rank == 3 ? e.reshape("x_bshd", x, {0, 0, nh, -1}) : x;
  const int64_t head_axis = rank == 3 ? 2 : 1;
  if (pos != kNoValue) {
    // With position_ids the caches are [max_pos, R/2] tables read by position: one Rope layer in
    // its cache mode (ops.def; docs/decisions/0067) — same pairing, same products, in float32.
    const std::map<std::string, Attribute> attrs = {{"head_axis", Attribute::of_int(head_axis)},
                                                    {"rotary_dim", Attribute::of_int(rdim)},
                                                    {"interleaved", Attribute::of_int(interleaved ? 1 : 0)}};
    if (rank == 4) {
      e.op(OpKind::kRope, "rope", {x4, pos, cos_c, sin_c}, attrs, output(n, 0));
    } else {
      e.reshape("y", e.op(OpKind::kRope, "rope", {x4, pos, cos_c, sin_c}, attrs), {0, 0, -1}, output(n, 0));
    }
    return Status::Ok();
  }
  // Without position_ids the caches are [B, S, R/2], already per token: the decomposition.
  const ValueId c = e.unsqueeze("cos_heads", cos_c, head_axis);  // [B, S, R/2] -> broadcasts over the heads
  const ValueId s = e.unsqueeze("sin_heads", sin_c, head_axis);
  ValueId x1, x2;
  const int64_t rot_end = rdim > 0 ? rdim : kEnd;
  if (interleaved) {
    x1 = e.slice("x_even", x4, 0, rot_end, 2);
    x2 = e.slice("x_odd", x4, 1, rot_end, 2);
  } else if (rdim > 0) {
    x1 = e.slice("x_first_half", x4, 0, rdim / 2);
    x2 = e.slice("x_second_half", x4, rdim / 2, rdim);
  } else {
    const auto halves = e.ops(OpKind::kSplit, "x_halves", {x4}, {{"axis", Attribute::of_int(-1)}, {"num_outputs", Attribute::of_int(2)}},
                              {e.fresh("x_first_half"), e.fresh("x_second_half")});
    x1 = halves[0];
    x2 = halves[1];
  }
  const ValueId real = e.op(OpKind::kSub, "real", {e.op(OpKind::kMul, "cos_x1", {c, x1}), e.op(OpKind::kMul, "sin_x2", {s, x2})});
  const ValueId imag = e.op(OpKind::kAdd, "imag", {e.op(OpKind::kMul, "sin_x1", {s, x1}), e.op(OpKind::kMul, "cos_x2", {c, x2})});
  const bool pass = rdim > 0 && (!head || *head != rdim);
  const ValueId y4_out = (rank == 4 && !pass) ? output(n, 0) : kNoValue;
  const Attribute last = Attribute::of_int(-1);
  ValueId rotated;
  if (interleaved) {  // [..., R/2] x 2 -> [..., R/2, 2] -> [..., R]: real, imag alternate
    const ValueId pairs = e.op(OpKind::kConcat, "pairs", {e.unsqueeze("real_pair", real, -1), e.unsqueeze("imag_pair", imag, -1)},
                               {{"axis", last}});
    rotated = e.reshape("rotated", pairs, {0, 0, 0, -1}, y4_out);
  } else {
    rotated = e.op(OpKind::kConcat, "rotated", {real, imag}, {{"axis", last}}, y4_out);
  }
  ValueId y4 = rotated;
  if (pass)
    y4 = e.op(OpKind::kConcat, "with_pass", {rotated, e.slice("x_pass", x4, rdim, kEnd)}, {{"axis", last}},
              rank == 4 ? output(n, 0) : kNoValue);
  if (rank == 3) e.reshape("y", y4, {0, 0, -1}, output(n, 0));
  return Status::Ok();
}

}  // namespace

bool is_lowered_op(const std::string& op_type, int64_t opset) {
  return opset >= 23 && (op_type == "Attention" || op_type == "RMSNormalization" || op_type == "RotaryEmbedding");
}

Status lower_op(const std::string& op_type, ir::Node n, ir::Graph* g) {
  if (op_type == "RMSNormalization") return lower_rms_norm(std::move(n), g);
  if (op_type == "Attention") return lower_attention(std::move(n), g);
  if (op_type == "RotaryEmbedding") return lower_rotary_embedding(std::move(n), g);
  return unsupported("node '" + n.name + "' (" + op_type + "): not an op Kiln lowers at import");
}

}  // namespace kiln::onnx_import
