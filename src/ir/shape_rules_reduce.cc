// Shape rules of reductions (axes attribute, or input since ReduceSum-13 and the other Reduce*
// ops at 18; keepdims, noop_with_empty_axes), ArgMax/ArgMin, TopK (k attribute before opset 10),
// Quantize/DequantizeLinear, DynamicQuantizeLinear, Einsum, Det and the two loss ops.
#include <algorithm>
#include <map>

#include "ir/shape_rules.h"
#include "kiln/quant_params.h"

namespace kiln::ir {
namespace {

Status reduce_rule(ShapeContext& ctx) {
  const bool axes_input = ctx.opset() >= (ctx.node().op == OpKind::kReduceSum ? 13 : 18);
  const auto axes = axes_from(ctx, "axes", 1, axes_input);
  const bool keep = ctx.node().attr_int("keepdims", 1) != 0;
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  if (!axes) {
    ctx.set_output(0, ctx.dtype(0), keep ? std::optional<SymShape>(SymShape(r)) : std::nullopt);
    return Status::Ok();
  }
  std::vector<char> red(r, 0);
  if (axes->empty()) {
    if (axes_input && ctx.node().attr_int("noop_with_empty_axes", 0)) {
      ctx.set_output(0, ctx.dtype(0), in);
      return Status::Ok();
    }
    std::fill(red.begin(), red.end(), 1);
  }
  for (int64_t a : *axes) {
    int64_t n;
    if (!normalize_axis(a, r, &n)) return ctx.fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
    red[n] = 1;
  }
  SymShape out;
  for (int i = 0; i < r; ++i) {
    if (!red[i]) out.push_back((*in)[i]);
    else if (keep) out.push_back(Dim::known(1));
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status arg_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, DataType::kInt64, std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  int64_t axis;
  if (!normalize_axis(ctx.node().attr_int("axis", 0), r, &axis)) return ctx.fail("axis out of range for rank " + std::to_string(r));
  SymShape out = *in;
  if (ctx.node().attr_int("keepdims", 1)) out[axis] = Dim::known(1);
  else out.erase(out.begin() + axis);
  ctx.set_output(0, DataType::kInt64, out);
  return Status::Ok();
}

Status topk_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) {
    ctx.set_output(0, ctx.dtype(0), std::nullopt);
    ctx.set_output(1, DataType::kInt64, std::nullopt);
    return Status::Ok();
  }
  const int r = static_cast<int>(in->size());
  int64_t axis;
  if (!normalize_axis(ctx.node().attr_int("axis", -1), r, &axis)) return ctx.fail("axis out of range for rank " + std::to_string(r));
  Dim k;
  if (ctx.opset() > 0 && ctx.opset() < 10) {
    k = Dim::known(ctx.node().attr_int("k", 0));
  } else if (auto kv = ctx.const_ints(1); kv && kv->size() == 1) {
    k = Dim::known((*kv)[0]);
  }
  if (k.is_known() && (*in)[axis].is_known() && k.value > (*in)[axis].value)
    return ctx.fail("k = " + std::to_string(k.value) + " exceeds the axis extent " + std::to_string((*in)[axis].value));
  SymShape out = *in;
  out[axis] = k;
  ctx.set_output(0, ctx.dtype(0), out);
  ctx.set_output(1, DataType::kInt64, out);
  return Status::Ok();
}

// Q/DQ scale and zero-point shapes against x (kiln/quant_params.h qdq_layout), checked when
// all three shapes are known (x dims that are symbols are skipped).
Status check_qdq_shapes(ShapeContext& ctx) {
  const auto& xs = ctx.shape(0);
  const auto& ss = ctx.shape(1);
  if (!xs || !ss) return Status::Ok();
  auto dims = [](const SymShape& s, bool allow_unknown, std::vector<int64_t>* out) {
    for (const Dim& d : s) {
      if (!d.is_known() && !allow_unknown) return false;
      out->push_back(d.is_known() ? d.value : -1);
    }
    return true;
  };
  std::vector<int64_t> x, scale, zp;
  if (!dims(*xs, true, &x) || !dims(*ss, false, &scale)) return Status::Ok();
  const bool has_zp = ctx.has_input(2) && ctx.shape(2);
  if (has_zp && !dims(*ctx.shape(2), false, &zp)) return Status::Ok();
  auto l = qdq_layout(x, scale, has_zp ? &zp : nullptr, ctx.node().attr_int("axis", 1), ctx.node().attr_int("block_size", 0));
  if (!l.ok()) return ctx.fail(l.status().message());
  return Status::Ok();
}

// QuantizeLinear: y has x's shape and the quantized type: output_dtype (opset 21+), which must
// equal the zero point's type when both are given; else the zero point's type; else uint8.
Status quantize_rule(ShapeContext& ctx) {
  DataType dt = DataType::kUInt8;
  const DataType zt = ctx.has_input(2) ? ctx.dtype(2) : DataType::kUndefined;
  if (zt != DataType::kUndefined) dt = zt;
  if (const int64_t od = ctx.node().attr_int("output_dtype", 0); ctx.opset() >= 21 && od != 0) {
    const DataType ot = dtype_from_onnx_code(od);
    if (zt != DataType::kUndefined && ot != zt)
      return ctx.fail("output_dtype " + std::to_string(od) + " (" + dtype_name(ot) + ") differs from the zero point's type " +
                      dtype_name(zt));
    dt = ot;
  }
  KILN_RETURN_IF_ERROR(check_qdq_shapes(ctx));
  ctx.set_output(0, dt, ctx.shape(0));
  return Status::Ok();
}

// DequantizeLinear: y has x's shape; its type is output_dtype (opset 23+), else the scale's
// (opset 19+; a float8e8m0 scale, opset 24, requires output_dtype), else float32.
Status dequantize_rule(ShapeContext& ctx) {
  DataType dt = ctx.opset() >= 19 && ctx.dtype(1) != DataType::kUndefined ? ctx.dtype(1) : DataType::kFloat32;
  if (const int64_t od = ctx.node().attr_int("output_dtype", 0); ctx.opset() >= 23 && od != 0) {
    dt = dtype_from_onnx_code(od);
  } else if (dt == DataType::kFloat8E8M0) {
    return ctx.fail("the scale is float8e8m0, so output_dtype is required (the output is float, float16 or bfloat16)");
  }
  KILN_RETURN_IF_ERROR(check_qdq_shapes(ctx));
  ctx.set_output(0, dt, ctx.shape(0));
  return Status::Ok();
}

Status dynamic_quantize_rule(ShapeContext& ctx) {
  ctx.set_output(0, DataType::kUInt8, ctx.shape(0));
  ctx.set_output(1, DataType::kFloat32, SymShape{});
  ctx.set_output(2, DataType::kUInt8, SymShape{});
  return Status::Ok();
}

// Operator Einsum-12: each letter names one dim (equal wherever it appears); "..." stands for
// broadcast leading dims; without "->" the output is the ellipsis then letters used once, sorted.
Status einsum_rule(ShapeContext& ctx) {
  std::string eq = ctx.node().attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    const size_t c = lhs.find(',', p);
    terms.push_back(lhs.substr(p, c == std::string::npos ? std::string::npos : c - p));
    if (c == std::string::npos) break;
    p = c + 1;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs())
    return ctx.fail("equation has " + std::to_string(terms.size()) + " operands, node has " + std::to_string(ctx.num_inputs()) + " inputs");
  std::map<char, Dim> dims;
  std::map<char, int> count;
  SymShape ell;
  bool ranks_known = true;
  for (size_t t = 0; t < terms.size(); ++t) {
    const std::string& term = terms[t];
    const auto& s = ctx.shape(static_cast<int>(t));
    const size_t e = term.find("...");
    const size_t letters = term.size() - (e == std::string::npos ? 0 : 3);
    for (char ch : term)
      if (ch != '.') ++count[ch];
    if (!s) { ranks_known = false; continue; }
    if (s->size() < letters || (e == std::string::npos && s->size() != letters))
      return ctx.fail("operand " + std::to_string(t) + " '" + term + "' does not match rank " + std::to_string(s->size()));
    const size_t ne = s->size() - letters;
    size_t d = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term[i] == '.') {
        if (term.compare(i, 3, "...") == 0) {
          SymShape mine(s->begin() + d, s->begin() + d + ne);
          const size_t n = std::max(ell.size(), mine.size());
          SymShape next(n);
          for (size_t k = 0; k < n; ++k) {
            const Dim a = k + ell.size() >= n ? ell[k + ell.size() - n] : Dim::known(1);
            const Dim b = k + mine.size() >= n ? mine[k + mine.size() - n] : Dim::known(1);
            if (!broadcast_dim(a, b, &next[k])) return ctx.fail("ellipsis dims do not broadcast");
          }
          ell = next;
          d += ne;
          i += 2;
        }
        continue;
      }
      const Dim& x = (*s)[d++];
      auto it = dims.find(term[i]);
      if (it == dims.end()) { dims[term[i]] = x; continue; }
      if (dims_conflict(it->second, x) && !(x.is_known() && x.value == 1) && !(it->second.is_known() && it->second.value == 1))
        return ctx.fail("label '" + std::string(1, term[i]) + "' has extents " + std::to_string(it->second.value) + " and " + std::to_string(x.value));
      it->second = (it->second.is_known() && it->second.value == 1) ? x : unify_dim(it->second, x);
    }
  }
  std::string out_term;
  if (arrow != std::string::npos) {
    out_term = eq.substr(arrow + 2);
  } else {
    out_term = lhs.find("...") != std::string::npos ? "..." : "";
    for (const auto& [ch, n] : count)
      if (n == 1 && ch != ',') out_term += ch;
  }
  if (!ranks_known) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  SymShape out;
  for (size_t i = 0; i < out_term.size(); ++i) {
    if (out_term[i] == '.') {
      if (out_term.compare(i, 3, "...") == 0) { out.insert(out.end(), ell.begin(), ell.end()); i += 2; }
      continue;
    }
    auto it = dims.find(out_term[i]);
    if (it == dims.end()) return ctx.fail("output label '" + std::string(1, out_term[i]) + "' does not appear in the inputs");
    out.push_back(it->second);
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status det_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (in && in->size() < 2) return ctx.fail("input rank " + std::to_string(in->size()) + ", expected >= 2");
  ctx.set_output(0, ctx.dtype(0), in ? std::optional<SymShape>(SymShape(in->begin(), in->end() - 2)) : std::nullopt);
  return Status::Ok();
}

Status loss_rule(ShapeContext& ctx) {
  const bool none = ctx.node().attr_string("reduction", "mean") == "none";
  ctx.set_output(0, ctx.dtype(0), none ? ctx.shape(1) : std::optional<SymShape>(SymShape{}));
  ctx.set_output(1, ctx.dtype(0), ctx.shape(0));  // SoftmaxCrossEntropyLoss's log_prob
  return Status::Ok();
}

}  // namespace

void register_reduce_shape_rules(ShapeRuleTable& t) {
  for (OpKind op : {OpKind::kReduceL1, OpKind::kReduceL2, OpKind::kReduceLogSum, OpKind::kReduceLogSumExp,
                    OpKind::kReduceMax, OpKind::kReduceMean, OpKind::kReduceMin, OpKind::kReduceProd,
                    OpKind::kReduceSum, OpKind::kReduceSumSquare})
    t.add(op, reduce_rule);
  t.add(OpKind::kArgMax, arg_rule);
  t.add(OpKind::kArgMin, arg_rule);
  t.add(OpKind::kTopK, topk_rule);
  t.add(OpKind::kQuantizeLinear, quantize_rule);
  t.add(OpKind::kDequantizeLinear, dequantize_rule);
  t.add(OpKind::kDynamicQuantizeLinear, dynamic_quantize_rule);
  t.add(OpKind::kEinsum, einsum_rule);
  t.add(OpKind::kDet, det_rule);
  t.add(OpKind::kNegativeLogLikelihoodLoss, loss_rule);
  t.add(OpKind::kSoftmaxCrossEntropyLoss, loss_rule);
}

}  // namespace kiln::ir
