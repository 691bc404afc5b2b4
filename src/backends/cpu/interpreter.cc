// Reference interpreter (see interpreter.h).
#include "backends/cpu/interpreter.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <stdexcept>

#include "backends/cpu/concat_slices.h"
#include "backends/cpu/cpu_kernel.h"
#include "core/checked_size.h"

namespace kiln {

const Tensor* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    ir::ValueId v = s->graph->find_value(name);
    if (v != ir::kNoValue && (*s->env)[v].defined()) return &(*s->env)[v];
  }
  return nullptr;
}

namespace {

// Names a subgraph (and its nested subgraphs) read from enclosing scopes.
std::vector<std::string> outer_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (ir::ValueId v : g.outer_refs) names.push_back(g.value(v).name);
  for (const ir::Node& n : g.nodes)
    for (const auto& [k, a] : n.attrs)
      if (a.kind == ir::Attribute::Kind::kGraph)
        for (auto& nm : outer_names(*a.g)) names.push_back(std::move(nm));
  return names;
}

// Ops whose kernels handle sequence and optional values (Tensor::kind() other than kTensor);
// every other kernel gets a clean error instead of a value it would misread.
// Runs one kernel. Every kernel allocates through Tensor, whose constructor throws when a shape
// passes the limits of core/checked_size.h or the memory is not there: this is the one place
// that turns that (and std::bad_alloc from a kernel's scratch vectors) into a Status naming the
// node, so no kernel entry can abort or corrupt the heap on a huge shape.
Status run_kernel(cpu::KernelFn fn, cpu::KernelContext& ctx) {
  try {
    return fn(ctx);
  } catch (const TensorAllocationError& e) {
    return Status(e.status().code(), ctx.node().describe() + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, ctx.node().describe() + ": out of memory for the kernel's scratch space");
  } catch (const std::length_error&) {
    return Status(StatusCode::kOutOfMemory, ctx.node().describe() + ": a scratch buffer would exceed the maximum size");
  }
}

bool takes_non_tensors(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kIdentity:
    case ir::OpKind::kIf:
    case ir::OpKind::kLoop:
    case ir::OpKind::kSequenceAt:
    case ir::OpKind::kSequenceConstruct:
    case ir::OpKind::kSequenceErase:
    case ir::OpKind::kSequenceInsert:
    case ir::OpKind::kSequenceLength:
    case ir::OpKind::kSequenceMap:
    case ir::OpKind::kConcatFromSequence:
    case ir::OpKind::kOptional:
    case ir::OpKind::kOptionalGetElement:
    case ir::OpKind::kOptionalHasElement:
      return true;
    default:
      return false;
  }
}

// Checks a runtime value against a graph input's declared type.
Status check_input_type(const ir::Value& v, const Tensor& t) {
  const char* got = t.is_sequence() ? "a sequence" : t.is_none() ? "an empty optional" : "a tensor";
  switch (v.kind) {
    case ir::ValueKind::kTensor:
      if (!t.is_tensor() && v.dtype != DataType::kUndefined)
        return invalid_argument("input '" + v.name + "': expected a tensor, got " + got);
      break;
    case ir::ValueKind::kSequence:
      if (!t.is_sequence()) return invalid_argument("input '" + v.name + "': expected a sequence, got " + got);
      break;
    case ir::ValueKind::kOptionalTensor:
    case ir::ValueKind::kOptionalSequence:
      return Status::Ok();
  }
  if (v.dtype != DataType::kUndefined && t.dtype() != v.dtype && !(t.is_sequence() && t.items().empty()))
    return invalid_argument("input '" + v.name + "': dtype " + dtype_name(t.dtype()) + ", expected " + dtype_name(v.dtype));
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<Tensor>> interpret(const ir::Graph& g, const std::vector<Tensor>& inputs, const Scope* outer,
                                        const InterpreterOptions& opts) {
  const auto& registry = cpu::KernelRegistry::get();
  if (inputs.size() != g.inputs.size())
    return invalid_argument("graph '" + g.name + "' takes " + std::to_string(g.inputs.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  std::vector<Tensor> env(g.values.size());
  for (const ir::Value& v : g.values)
    if (v.constant) env[v.id] = *v.constant;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(check_input_type(g.value(g.inputs[i]), inputs[i]));
    env[g.inputs[i]] = inputs[i];
  }
  for (ir::ValueId v : g.outer_refs) {
    const Tensor* t = outer ? outer->lookup(g.value(v).name) : nullptr;
    if (!t) return invalid_argument("graph '" + g.name + "': outer-scope value '" + g.value(v).name + "' is not available");
    env[v] = *t;
  }
  // Last use of each value, so intermediates are freed as soon as possible.
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ir::ValueId v : g.nodes[i].inputs)
      if (v != ir::kNoValue) last_use[v] = static_cast<int>(i);
  for (ir::ValueId v : g.outputs) last_use[v] = static_cast<int>(g.nodes.size());
  // Subgraphs read enclosing values by name: keep those alive until their node has run.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& [k, a] : g.nodes[i].attrs) {
      if (a.kind != ir::Attribute::Kind::kGraph) continue;
      for (const std::string& name : outer_names(*a.g)) {
        ir::ValueId v = g.find_value(name);
        if (v != ir::kNoValue) last_use[v] = std::max(last_use[v], static_cast<int>(i));
      }
    }
  }

  // Concat elimination (passes/concat_in_place.cc): producers fill slices of Concat outputs.
  ConcatSlices slices(g);
  std::vector<Tensor> offered;

  Scope scope{&g, &env, outer};
  SubgraphRunner runner = [&scope, &opts](const ir::Graph& sub, const std::vector<Tensor>& in) {
    return interpret(sub, in, &scope, opts);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.removed) continue;
    cpu::KernelFn fn = registry.find(n.op);
    if (!fn) return unsupported(n.describe() + ": no CPU kernel for op " + ir::op_name(n.op));
    std::vector<const Tensor*> in;
    for (ir::ValueId v : n.inputs) {
      if (v == ir::kNoValue) { in.push_back(nullptr); continue; }
      if (!env[v].defined()) return internal_error(n.describe() + ": input '" + g.value(v).name + "' was not computed");
      if (!env[v].is_tensor() && !takes_non_tensors(n.op))
        return invalid_argument(n.describe() + ": input '" + g.value(v).name + "' is " +
                                (env[v].is_sequence() ? "a sequence" : "an empty optional") + ", the op takes tensors");
      in.push_back(&env[v]);
    }
    std::vector<Tensor> out(n.outputs.size());
    auto t0 = std::chrono::steady_clock::now();
    Status s = Status::Ok();
    if (slices.empty() || n.op != ir::OpKind::kConcat || !slices.run_concat(i, in, &out[0])) {
      cpu::KernelContext ctx(n, std::move(in), &out, runner);
      if (!slices.empty()) {
        offered.assign(n.outputs.size(), Tensor());
        for (size_t k = 0; k < n.outputs.size(); ++k)
          if (n.outputs[k] != ir::kNoValue) offered[k] = slices.offer(n.outputs[k]);
        ctx.offer_outputs(&offered);
      }
      s = run_kernel(fn, ctx);
    }
    if (!s.ok()) {
      if (s.message().rfind("node '", 0) == 0) return s;
      return Status(s.code(), n.describe() + ": " + s.message());
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k] == ir::kNoValue) continue;
      if (!out[k].defined()) return internal_error(n.describe() + ": kernel did not produce output " + std::to_string(k));
    }
    if (opts.on_node) opts.on_node(n, out, ms);
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (n.outputs[k] != ir::kNoValue) env[n.outputs[k]] = slices.place(n.outputs[k], std::move(out[k]));
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue && last_use[v] == static_cast<int>(i) && !g.value(v).constant) env[v] = Tensor();
  }
  std::vector<Tensor> results;
  for (ir::ValueId v : g.outputs) {
    if (!env[v].defined()) return internal_error("graph output '" + g.value(v).name + "' was not computed");
    results.push_back(env[v]);
  }
  return results;
}

namespace {

class ReferenceEvaluator final : public ir::ConstantEvaluator {
 public:
  bool supports(ir::OpKind op) const override { return cpu::KernelRegistry::get().find(op) != nullptr; }
  StatusOr<std::vector<Tensor>> evaluate(const ir::Graph& g) const override { return interpret(g, {}); }
};

}  // namespace

const ir::ConstantEvaluator& reference_evaluator() {
  static const ReferenceEvaluator eval;
  return eval;
}

}  // namespace kiln
