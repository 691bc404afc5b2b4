// A spatial mean written as a reduction becomes the dedicated pooling layer:
//   ReduceMean(x[N,C,H,W], axes={2,3}, keepdims=1)  ->  GlobalAveragePool(x)              [N,C,1,1]
//   ReduceMean(x[N,C,H,W], axes={2,3}, keepdims=0)  ->  Flatten(GlobalAveragePool(x), 1)  [N,C]
// (ONNX GlobalAveragePool: the mean over all spatial dims; ReduceMean takes axes as an attribute
// before opset 18 and as an input since.) The keepdims=0 form adds a layer, so it runs only at
// opt level 3. x must be rank 4 with a floating dtype (GlobalAveragePool's T).
#include <algorithm>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

bool spatial_mean_axes(const ir::Graph& g, const ir::Node& n) {
  std::vector<int64_t> axes;
  if (n.opset >= 18) {
    if (n.inputs.size() < 2 || !constant_ints(g, n.inputs[1], &axes)) return false;
  } else {
    axes = n.attr_ints("axes");
  }
  for (auto& a : axes) a = a < 0 ? a + 4 : a;
  std::sort(axes.begin(), axes.end());
  return axes == std::vector<int64_t>{2, 3};
}

bool pool_dtype(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kFloat64;
}

std::string fresh_name(const ir::Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 1; g.find_value(name) != ir::kNoValue; ++k) name = base + "_" + std::to_string(k);
  return name;
}

}  // namespace

Status reduce_mean_to_global_pool(ir::Graph& g, const PassOptions& opts) {
  std::vector<ir::NodeId> flatten_after;  // keepdims=0 layers, rewritten after the scan
  for (auto& n : g.nodes) {
    if (n.removed || n.op != ir::OpKind::kReduceMean || n.inputs.empty() || n.inputs[0] == ir::kNoValue) continue;
    const ir::Value& x = g.value(n.inputs[0]);
    if (x.kind != ir::ValueKind::kTensor || !x.shape || x.shape->size() != 4 || !pool_dtype(x.dtype)) continue;
    if (!spatial_mean_axes(g, n)) continue;
    if (n.attr_int("keepdims", 1) == 0) {
      if (opts.opt_level >= 3) flatten_after.push_back(n.id);
      continue;
    }
    n.op = ir::OpKind::kGlobalAveragePool;
    n.inputs.resize(1);
    n.attrs.clear();
  }
  // add_node may reallocate g.nodes, so these are rewritten by id.
  for (ir::NodeId id : flatten_after) {
    const ir::ValueId x = g.node(id).inputs[0];
    const ir::ValueId y = g.node(id).outputs[0];
    const ir::ValueId pooled = g.add_value(fresh_name(g, g.value(y).name + "_pooled"), g.value(x).dtype);
    ir::SymShape s = *g.value(x).shape;
    s[2] = s[3] = ir::Dim::known(1);
    g.value(pooled).shape = s;
    ir::Node flatten;
    flatten.name = g.node(id).name + "_flatten";
    flatten.op = ir::OpKind::kFlatten;
    flatten.opset = g.node(id).opset;
    flatten.inputs = {pooled};
    flatten.outputs = {y};
    flatten.origin = g.node(id).origin;
    flatten.attrs["axis"] = ir::Attribute::of_int(1);
    ir::Node& n = g.node(id);
    n.op = ir::OpKind::kGlobalAveragePool;
    n.inputs.resize(1);
    n.attrs.clear();
    n.outputs[0] = pooled;
    g.value(pooled).producer = id;
    g.add_node(std::move(flatten));
  }
  return Status::Ok();
}

}  // namespace kiln::passes
