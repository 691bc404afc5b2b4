// Concrete shapes and dtypes of every value of a graph at given input shapes (gpu_model.h):
// static shape inference when it determines them all, else one CPU reference run (refused for
// graphs holding an op that writes memory named by its inputs, PagedAttention). Host code
// only; the CUDA lowering needs these before it picks kernels and sizes the arena.
#include <map>
#include <random>

#include "backends/cpu/interpreter.h"
#include "backends/cuda/gpu_model.h"
#include "core/numerics.h"
#include "ir/op_kind.h"
#include "ir/shape_inference.h"

namespace kiln::cuda {

namespace {

const char* value_kind_words(ir::ValueKind k) {
  switch (k) {
    case ir::ValueKind::kSequence: return "a sequence";
    case ir::ValueKind::kOptionalTensor: return "an optional tensor";
    case ir::ValueKind::kOptionalSequence: return "an optional sequence";
    case ir::ValueKind::kTensor: break;
  }
  return "a tensor";
}

// One CPU reference run on `inputs`: every value's shape and dtype (constants as they are).
StatusOr<ValueShapes> reference_run(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  ValueShapes vs;
  vs.shapes.resize(g.values.size());
  vs.dtypes.resize(g.values.size(), DataType::kUndefined);
  for (size_t i = 0; i < g.inputs.size() && i < inputs.size(); ++i) {
    vs.shapes[g.inputs[i]] = inputs[i].shape();
    vs.dtypes[g.inputs[i]] = inputs[i].dtype();
  }
  for (const ir::Value& v : g.values)
    if (v.constant) {
      vs.shapes[v.id] = v.constant->shape();
      vs.dtypes[v.id] = v.constant->dtype();
    }
  InterpreterOptions opts;
  opts.on_node = [&](const ir::Node& n, const std::vector<Tensor>& outs, double) {
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k] == ir::kNoValue) continue;
      vs.shapes[n.outputs[k]] = outs[k].shape();
      vs.dtypes[n.outputs[k]] = outs[k].dtype();
    }
  };
  auto r = interpret(g, inputs, nullptr, opts);
  if (!r.ok()) return r.status();
  return vs;
}

// Made-up inputs at `input_shapes`: seeded uniform values in [lo, hi) stored in each input's dtype
// (integers truncated toward zero: [-1, 1) gives 0s); with `int_hi` > 0, integer inputs instead
// take 0 .. int_hi - 1.
std::vector<Tensor> made_up_inputs(const ir::Graph& g, const std::vector<Shape>& input_shapes, uint32_t seed,
                                   float lo, float hi, int int_hi = 0) {
  std::vector<Tensor> inputs;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::Value& v = g.value(g.inputs[i]);
    DataType dt = v.dtype == DataType::kUndefined ? DataType::kFloat32 : v.dtype;
    Tensor t(dt, input_shapes.at(i));
    const bool small_ints = int_hi > 0 && !dtype_is_float(dt);
    for (int64_t k = 0; k < t.numel(); ++k)
      store_from_double(dt, t.raw(), k, small_ints ? static_cast<double>(rng() % static_cast<uint32_t>(int_hi)) : dist(rng));
    inputs.push_back(std::move(t));
  }
  return inputs;
}

}  // namespace

Status check_tensor_io(const ir::Graph& g) {
  for (ir::ValueId v : g.inputs)
    if (g.value(v).kind != ir::ValueKind::kTensor)
      return unsupported("graph input '" + g.value(v).name + "' is " + value_kind_words(g.value(v).kind) +
                         ": CUDA engines take and return tensors only (sequence and optional values run on the CPU)");
  for (ir::ValueId v : g.outputs)
    if (g.value(v).kind != ir::ValueKind::kTensor)
      return unsupported("graph output '" + g.value(v).name + "' is " + value_kind_words(g.value(v).kind) +
                         ": CUDA engines take and return tensors only (sequence and optional values run on the CPU)");
  return Status::Ok();
}

namespace {

StatusOr<ValueShapes> discover(const ir::Graph& g, const std::vector<Shape>& input_shapes,
                               const std::vector<Tensor>* values) {
  KILN_RETURN_IF_ERROR(check_tensor_io(g));
  // Static shape inference with the concrete input shapes answers without running the model;
  // the reference run is the fallback for data-dependent shapes. That run feeds made-up inputs:
  // an op that writes memory named by its inputs (PagedAttention appends to the pool whose
  // address is input kv_pools; on a CUDA plan a device address) must never run on them.
  const ir::Node* writer = nullptr;
  for (const ir::Node& n : g.nodes)
    if (!n.removed && ir::op_writes_memory(n.op)) writer = &n;
  // Ops whose output extent is computed from input values (NonMaxSuppression, Unique, NonZero; Compress
  // with a run-time condition): a shape the model declares for their outputs is only the
  // exporter's example, so static inference's answer is not taken, the shapes come from
  // reference runs and the graph is value-dependent (decision 0074).
  const ir::Node* value_sized = nullptr;
  for (const ir::Node& n : g.nodes)
    if (!n.removed && (n.op == ir::OpKind::kNonMaxSuppression || n.op == ir::OpKind::kUnique || n.op == ir::OpKind::kNonZero ||
                       (n.op == ir::OpKind::kCompress && n.inputs.size() > 1 && n.inputs[1] != ir::kNoValue &&
                        !g.value(n.inputs[1]).constant)))
      value_sized = &n;
  auto mark_value_sized = [&](ValueShapes& r) {
    if (!value_sized || r.value_dependent) return;
    r.value_dependent = true;
    r.dependence = value_sized->describe() + ": its output's extent depends on the graph's input values";
  };
  if (!value_sized) {
    ir::Graph c = g;
    std::map<std::string, Shape> concrete;
    for (size_t i = 0; i < g.inputs.size() && i < input_shapes.size(); ++i)
      concrete[g.value(g.inputs[i]).name] = input_shapes[i];
    const Status inferred = ir::infer_shapes(c, &concrete, &reference_evaluator());
    if (!inferred.ok() && writer) return inferred;  // a shape rule's error names the node and the reason
    if (inferred.ok()) {
      // Values no layer reads or writes any more (absorbed by fusion) keep their old symbolic
      // shapes; they do not need concrete ones.
      std::vector<bool> live(c.values.size(), false);
      for (ir::ValueId v : c.inputs) live[v] = true;
      for (ir::ValueId v : c.outputs) live[v] = true;
      for (const ir::Node& n : c.nodes) {
        for (ir::ValueId v : n.inputs)
          if (v != ir::kNoValue) live[v] = true;
        for (ir::ValueId v : n.outputs)
          if (v != ir::kNoValue) live[v] = true;
      }
      ValueShapes st;
      bool complete = true;
      for (const ir::Value& v : c.values) {
        if (!live[v.id]) {
          st.shapes.push_back({});
          st.dtypes.push_back(v.dtype);
          continue;
        }
        Shape s;
        if (v.shape)
          for (const ir::Dim& d : *v.shape) {
            if (!d.is_known()) complete = false;
            s.push_back(d.value);
          }
        else
          complete = false;
        if (v.dtype == DataType::kUndefined) complete = false;
        st.shapes.push_back(s);
        st.dtypes.push_back(v.dtype);
        if (!complete) break;
      }
      if (complete) return st;
    }
  }
  if (writer)
    return unsupported(writer->describe() +
                       ": the graph's shapes need a CPU reference run (static shape inference left some "
                       "unknown), which cannot run this op: it writes memory named by its inputs");
  // The caller's own input values (an engine's run): the shapes at exactly these values.
  if (values) {
    auto r = reference_run(g, *values);
    if (!r.ok()) return r.status().with_context("shape discovery on the CPU reference");
    r->value_dependent = true;  // static inference could not fix them: they may depend on the values
    return r;
  }
  // Made-up values. A shape that only the values can fix (Range's length from an input scalar,
  // an expanded window function's size) would be fixed wrongly by them: a second run with other
  // values (seeded uniform in [2, 9) instead of [-1, 1)) tells such graphs apart. Where that run
  // fails (integer inputs used as indices into a table of two rows: token_type_ids), integers
  // take 0 or 1 instead; where that fails too, the graph is taken as not value-dependent (the
  // behaviour before decision 0069: a marked engine relowers per set of values and cannot
  // enqueue, too heavy a price for a guess). Marked graphs' engines discover the shapes again at
  // each call's own input values (gpu_engine.cc).
  auto r = reference_run(g, made_up_inputs(g, input_shapes, 1234, -1.f, 1.f));
  if (!r.ok()) return r.status().with_context("shape discovery on the CPU reference");
  mark_value_sized(*r);
  auto again = reference_run(g, made_up_inputs(g, input_shapes, 4321, 2.f, 9.f));
  if (!again.ok()) again = reference_run(g, made_up_inputs(g, input_shapes, 4321, 2.f, 9.f, 2));
  if (!again.ok()) return r;
  for (const ir::Value& v : g.values) {
    if (r->shapes[v.id] == again->shapes[v.id] && r->dtypes[v.id] == again->dtypes[v.id]) continue;
    r->value_dependent = true;
    r->dependence = "the shape of value '" + v.name + "' depends on the graph's input values (" +
                    shape_str(r->shapes[v.id]) + " or " + shape_str(again->shapes[v.id]) + ")";
    break;
  }
  return r;
}

}  // namespace

StatusOr<ValueShapes> infer_value_shapes_by_reference(const ir::Graph& g, const std::vector<Shape>& input_shapes) {
  return infer_value_shapes_by_reference(g, input_shapes, nullptr);
}

StatusOr<ValueShapes> infer_value_shapes_by_reference(const ir::Graph& g, const std::vector<Shape>& input_shapes,
                                                      const std::vector<Tensor>* values) {
  auto r = discover(g, input_shapes, values);
  if (!r.ok() || values) return r;
  // Shape-tensor inputs (decision 0073): their values decide the lowering whether or not the two
  // made-up runs happened to agree (ReduceSum's axes with keepdims may keep every shape).
  const std::vector<ShapeInput> si = shape_operand_inputs(g);
  if (!si.empty()) {
    r->value_dependent = true;
    r->dependence = shape_input_dependence(g, si);
  }
  return r;
}

}  // namespace kiln::cuda
