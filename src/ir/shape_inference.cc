// The shape inference driver: walks nodes in order, hands each rule its inputs' dtypes, shapes,
// constants and tracked shape-tensor values, stores the results, merges shapes the model
// declared, and folds cheap all-constant nodes with the constant evaluator, when given one.
#include "ir/shape_inference.h"

#include "core/checked_size.h"
#include "core/numerics.h"
#include "ir/shape_rules.h"

namespace kiln::ir {
namespace {

constexpr int64_t kMaxTrackedElements = 64;   // shape tensors are short; larger ones are data
constexpr int64_t kMaxFoldElements = 4096;    // all-constant nodes folded at inference time

bool is_int_dtype(DataType t) { return dtype_is_integer(t); }

std::optional<SymValues> values_of_constant(const Tensor& t) {
  if (!is_int_dtype(t.dtype()) || t.rank() > 1 || t.numel() > kMaxTrackedElements) return std::nullopt;
  SymValues v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(SymInt::constant(load_as_int64(t.dtype(), t.raw(), i)));
  return v;
}

SymShape known_shape(const Shape& s) {
  SymShape r;
  for (int64_t d : s) r.push_back(Dim::known(d));
  return r;
}

// Declared dims fill what inference left unknown; inferred known extents win.
std::optional<SymShape> merge_declared(const std::optional<SymShape>& inferred, const std::optional<SymShape>& declared) {
  if (!inferred) return declared;
  if (!declared || declared->size() != inferred->size()) return inferred;
  SymShape r = *inferred;
  for (size_t i = 0; i < r.size(); ++i) {
    const Dim& d = (*declared)[i];
    if (!r[i].is_known() && (d.is_known() || (r[i].symbol.empty() && !d.symbol.empty()))) r[i] = d;
  }
  return r;
}

bool node_has_subgraph(const Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.kind == Attribute::Kind::kGraph) return true;
  return false;
}

// Ops never folded: heavy compute, or whose result is not a function of the inputs alone.
bool foldable_op(OpKind op) {
  if (op_writes_memory(op)) return false;  // PagedAttention: writes the KV pool
  switch (op) {
    case OpKind::kConv: case OpKind::kConvTranspose: case OpKind::kConvInteger: case OpKind::kQLinearConv:
    case OpKind::kLSTM: case OpKind::kGRU: case OpKind::kRNN: case OpKind::kDropout:
    case OpKind::kIf: case OpKind::kLoop: case OpKind::kScan:
      return false;
    default:
      return true;
  }
}

class Inferrer {
 public:
  Inferrer(Graph& g, const Inferrer* parent, const ConstantEvaluator* eval)
      : g_(g), parent_(parent), eval_(eval), values_(g.values.size()), folded_(g.values.size()) {}

  Status run(const std::map<std::string, Shape>* concrete) {
    std::vector<char> is_source(g_.values.size(), 0);
    for (Value& v : g_.values) {
      if (!v.constant) continue;
      v.dtype = v.constant->dtype();
      v.shape = known_shape(v.constant->shape());
      values_[v.id] = values_of_constant(*v.constant);
      is_source[v.id] = 1;
    }
    for (ValueId id : g_.inputs) {
      Value& v = g_.value(id);
      is_source[id] = 1;
      if (!concrete) continue;
      auto it = concrete->find(v.name);
      if (it != concrete->end()) v.shape = known_shape(it->second);
    }
    for (ValueId id : g_.outer_refs) {
      is_source[id] = 1;
      resolve_outer(g_.value(id));
    }
    for (Node& n : g_.nodes) {
      if (n.removed) continue;
      KILN_RETURN_IF_ERROR(infer_node(n, is_source));
    }
    return Status::Ok();
  }

  // Finds a value visible by name in this graph or an enclosing one.
  bool lookup(const std::string& name, const Value** v, const SymValues** vals, const Tensor** t) const {
    for (const Inferrer* s = this; s; s = s->parent_) {
      ValueId id = s->g_.find_value(name);
      if (id == kNoValue) continue;
      *v = &s->g_.value(id);
      *vals = s->values_[id] ? &*s->values_[id] : nullptr;
      *t = s->constant_of(id);
      return true;
    }
    return false;
  }

 private:
  const Tensor* constant_of(ValueId id) const {
    const Value& v = g_.value(id);
    if (v.constant) return v.constant.get();
    return folded_[id].get();
  }

  // A computed shape tensor whose tracked values are all known (Shape -> Gather -> Concat at
  // concrete input shapes) as a tensor, so the nodes reading it can be folded like constants
  // (the Equal / Where guards exporters put around Expand and Reshape shapes). Cached.
  const Tensor* materialize(ValueId id) {
    const Value& v = g_.value(id);
    if (!values_[id] || !is_int_dtype(v.dtype) || !v.shape || v.shape->size() > 1) return nullptr;
    const SymValues& vals = *values_[id];
    Shape shape;
    for (const Dim& d : *v.shape) {
      if (!d.is_known()) return nullptr;
      shape.push_back(d.value);
    }
    if (shape_numel(shape) != static_cast<int64_t>(vals.size())) return nullptr;
    for (const SymInt& x : vals)
      if (!x.is_const()) return nullptr;
    auto t = std::make_shared<Tensor>(v.dtype, shape);
    for (size_t i = 0; i < vals.size(); ++i) store_from_int64(v.dtype, t->raw(), static_cast<int64_t>(i), vals[i].c);
    folded_[id] = t;
    return t.get();
  }

  void resolve_outer(Value& v) {
    if (!parent_) return;
    const Value* o = nullptr;
    const SymValues* vals = nullptr;
    const Tensor* t = nullptr;
    if (!parent_->lookup(v.name, &o, &vals, &t)) return;
    if (o->dtype != DataType::kUndefined) v.dtype = o->dtype;
    if (o->shape) v.shape = o->shape;
    if (vals) values_[v.id] = *vals;
    if (t) folded_[v.id] = std::make_shared<Tensor>(*t);
  }

  StatusOr<std::vector<std::pair<DataType, std::optional<SymShape>>>> infer_sub(
      const Graph& sub, const std::vector<std::pair<DataType, std::optional<SymShape>>>& in,
      std::shared_ptr<Graph>* updated) const {
    auto copy = std::make_shared<Graph>(sub);
    for (size_t i = 0; i < copy->inputs.size() && i < in.size(); ++i) {
      Value& v = copy->value(copy->inputs[i]);
      if (in[i].first != DataType::kUndefined) v.dtype = in[i].first;
      v.shape = merge_declared(in[i].second, v.shape);
    }
    Inferrer child(*copy, this, eval_);
    KILN_RETURN_IF_ERROR(child.run(nullptr));
    std::vector<std::pair<DataType, std::optional<SymShape>>> out;
    for (ValueId id : copy->outputs) out.emplace_back(copy->value(id).dtype, copy->value(id).shape);
    *updated = copy;
    return out;
  }

  Status infer_node(Node& n, const std::vector<char>& is_source) {
    std::vector<ShapeContext::Input> ins;
    bool all_const = true;
    int64_t in_elems = 0;
    for (ValueId id : n.inputs) {
      ShapeContext::Input in;
      in.id = id;
      if (id != kNoValue) {
        const Value& v = g_.value(id);
        in.dtype = v.dtype;
        in.shape = v.shape;
        in.constant = constant_of(id);
        if (!in.constant) in.constant = materialize(id);
        in.values = values_[id] ? &*values_[id] : nullptr;
        if (!in.constant) all_const = false;
        else in_elems += in.constant->numel();
      }
      ins.push_back(std::move(in));
    }
    ShapeRule rule = ShapeRuleTable::get().find(n.op);
    if (!rule) return unsupported(n.describe() + ": no shape rule for op " + op_name(n.op));
    ShapeContext ctx(n, std::move(ins), [this](const Graph& sub, const auto& in, std::shared_ptr<Graph>* up) {
      return infer_sub(sub, in, up);
    });
    KILN_RETURN_IF_ERROR(rule(ctx));
    KILN_RETURN_IF_ERROR(check_output_sizes(n, ctx));

    std::vector<Tensor> folded;
    if (all_const && in_elems <= kMaxFoldElements && foldable_op(n.op) && !node_has_subgraph(n) &&
        outputs_small(ctx))
      folded = fold(n);

    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueId id = n.outputs[k];
      if (id == kNoValue || is_source[id]) continue;
      Value& v = g_.value(id);
      const auto& o = ctx.outputs()[k];
      if (k < folded.size() && folded[k].defined()) {
        v.dtype = folded[k].dtype();
        v.shape = known_shape(folded[k].shape());
        values_[id] = values_of_constant(folded[k]);
        folded_[id] = std::make_shared<Tensor>(std::move(folded[k]));
        continue;
      }
      if (!o.set) continue;
      if (o.dtype != DataType::kUndefined) v.dtype = o.dtype;
      v.shape = merge_declared(o.shape, v.shape);
      if (o.values) values_[id] = o.values;
    }
    return Status::Ok();
  }

  // A fully known output shape must have a valid element count (core/checked_size.h): a Conv
  // with pads of 2^40 or a batch of 2^62 fails the build here, naming the tensor.
  Status check_output_sizes(const Node& n, const ShapeContext& ctx) const {
    for (size_t k = 0; k < n.outputs.size() && k < ctx.outputs().size(); ++k) {
      const auto& o = ctx.outputs()[k];
      if (!o.set || !o.shape || n.outputs[k] == kNoValue) continue;
      KILN_RETURN_IF_ERROR(check_rank(o.shape->size(), n.describe() + ": output '" + g_.value(n.outputs[k]).name + "'"));
      Shape s;
      for (const Dim& d : *o.shape) {
        if (!d.is_known()) break;
        s.push_back(d.value);
      }
      if (s.size() != o.shape->size()) continue;
      auto numel = checked_numel(s, n.describe() + ": output '" + g_.value(n.outputs[k]).name + "'");
      if (!numel.ok()) return numel.status();
    }
    return Status::Ok();
  }

  static bool outputs_small(const ShapeContext& ctx) {
    for (const auto& o : ctx.outputs()) {
      if (!o.set || !o.shape) return false;
      int64_t n = 1;
      for (const Dim& d : *o.shape) {
        if (!d.is_known() || !checked_mul(n, d.value, &n)) return false;
      }
      if (n > kMaxFoldElements) return false;
    }
    return true;
  }

  // Runs the node alone on the constant evaluator; empty when there is none, it does not
  // support the op or evaluation fails.
  std::vector<Tensor> fold(const Node& n) const {
    if (!eval_ || !eval_->supports(n.op)) return {};
    Graph one;
    one.opset_imports = g_.opset_imports;
    Node copy = n;
    copy.inputs.clear();
    copy.outputs.clear();
    for (ValueId id : n.inputs) {
      if (id == kNoValue) { copy.inputs.push_back(kNoValue); continue; }
      ValueId v = one.add_value(g_.value(id).name, g_.value(id).dtype);
      one.value(v).constant = std::make_shared<Tensor>(*constant_of(id));
      copy.inputs.push_back(v);
    }
    for (ValueId id : n.outputs) {
      if (id == kNoValue) { copy.outputs.push_back(kNoValue); continue; }
      ValueId v = one.add_value(g_.value(id).name + "#out");
      copy.outputs.push_back(v);
      one.outputs.push_back(v);
    }
    one.add_node(std::move(copy));
    auto r = eval_->evaluate(one);
    if (!r.ok()) return {};
    std::vector<Tensor> out;
    size_t j = 0;
    for (ValueId id : n.outputs) out.push_back(id == kNoValue ? Tensor() : (*r)[j++]);
    return out;
  }

  Graph& g_;
  const Inferrer* parent_;
  const ConstantEvaluator* eval_;
  std::vector<std::optional<SymValues>> values_;
  std::vector<std::shared_ptr<const Tensor>> folded_;
};

}  // namespace

Status infer_shapes(Graph& g, const std::map<std::string, Shape>* concrete_inputs, const ConstantEvaluator* eval) {
  Inferrer inf(g, nullptr, eval);
  return inf.run(concrete_inputs);
}

bool every_op_has_shape_rule(std::string* missing) {
  bool all = true;
  for (int i = 0; i < kNumOps; ++i) {
    if (ShapeRuleTable::get().find(static_cast<OpKind>(i))) continue;
    all = false;
    if (missing) *missing += std::string(missing->empty() ? "" : ", ") + op_name(static_cast<OpKind>(i));
  }
  return all;
}

}  // namespace kiln::ir
