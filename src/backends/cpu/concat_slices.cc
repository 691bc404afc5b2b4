// Concat elimination in the CPU interpreter (see concat_slices.h).
#include "backends/cpu/concat_slices.h"

#include <algorithm>
#include <cstring>

namespace kiln {

namespace {

bool static_shape(const ir::Graph& g, ir::ValueId v, Shape* out) {
  if (v == ir::kNoValue || !g.value(v).shape) return false;
  out->clear();
  for (const ir::Dim& d : *g.value(v).shape) {
    if (!d.is_known()) return false;
    out->push_back(d.value);
  }
  return true;
}

}  // namespace

ConcatSlices::ConcatSlices(const ir::Graph& g) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.removed || n.op != ir::OpKind::kConcat || !n.has_attr("in_place") || n.outputs.size() != 1) continue;
    const std::vector<int64_t> flags = n.attr_ints("in_place");
    Concat c;
    c.out = n.outputs[0];
    c.dtype = g.value(c.out).dtype;
    if (flags.size() != n.inputs.size() || !static_shape(g, c.out, &c.shape) || c.shape.empty()) continue;
    const size_t elem = dtype_storage_bytes(c.dtype, 1);
    if (c.dtype == DataType::kUndefined || c.dtype == DataType::kString || elem == 0 ||
        dtype_storage_bytes(c.dtype, 2) != 2 * elem)
      continue;
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(c.shape.size());
    if (axis < 0 || axis >= static_cast<int64_t>(c.shape.size()) ||
        std::any_of(c.shape.begin(), c.shape.begin() + axis, [](int64_t d) { return d != 1; }))
      continue;
    bool ok = true;
    size_t off = 0;
    for (ir::ValueId v : n.inputs) {
      Shape s;
      ok = ok && static_shape(g, v, &s) && s.size() == c.shape.size() && g.value(v).dtype == c.dtype;
      if (!ok) break;
      c.in_shapes.push_back(s);
      c.offsets.push_back(off);
      off += static_cast<size_t>(shape_numel(s)) * elem;
    }
    if (!ok || off != static_cast<size_t>(shape_numel(c.shape)) * elem) continue;
    c.placed.assign(n.inputs.size(), false);
    const int ci = static_cast<int>(concats_.size());
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const ir::ValueId v = n.inputs[k];
      if (flags[k] != 1 || g.value(v).producer < 0 || g.value(v).constant || slots_.count(v)) continue;
      slots_[v] = Slot{ci, static_cast<int>(k)};
    }
    by_node_[i] = ci;
    concats_.push_back(std::move(c));
  }
  // A nested in-place Concat's output is a slice of the outer one only when the static shapes agree.
  for (auto it = slots_.begin(); it != slots_.end();) {
    const Concat& outer = concats_[it->second.concat];
    bool drop = false;
    for (const Concat& inner : concats_)
      if (inner.out == it->first)
        drop = inner.shape != outer.in_shapes[it->second.input] || inner.dtype != outer.dtype;
    it = drop ? slots_.erase(it) : std::next(it);
  }
}

Tensor ConcatSlices::buffer(int ci) {
  Concat& c = concats_[ci];
  if (c.buffer.defined()) return c.buffer;
  auto s = slots_.find(c.out);
  if (s != slots_.end()) {  // nested: this output is itself a slice of an outer in-place Concat
    const Concat& outer = concats_[s->second.concat];
    c.buffer = buffer(s->second.concat).view(outer.offsets[s->second.input], c.dtype, c.shape);
  } else {
    c.buffer = Tensor(c.dtype, c.shape);
  }
  return c.buffer;
}

Tensor ConcatSlices::offer(ir::ValueId v) {
  auto s = slots_.find(v);
  if (s == slots_.end()) return Tensor();
  const Concat& c = concats_[s->second.concat];
  const int k = s->second.input;
  return buffer(s->second.concat).view(c.offsets[k], c.dtype, c.in_shapes[k]);
}

Tensor ConcatSlices::place(ir::ValueId v, Tensor t) {
  auto s = slots_.find(v);
  if (s == slots_.end()) return t;
  Concat& c = concats_[s->second.concat];
  const int k = s->second.input;
  if (!t.is_tensor() || t.dtype() != c.dtype || t.shape() != c.in_shapes[k]) return t;
  Tensor slice = offer(v);
  if (slice.raw() != t.raw() && t.nbytes()) std::memcpy(slice.raw(), t.raw(), t.nbytes());
  c.placed[k] = true;
  return slice;
}

bool ConcatSlices::run_concat(size_t node, const std::vector<const Tensor*>& inputs, Tensor* out) {
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return false;
  const int ci = it->second;
  Concat& c = concats_[ci];
  if (inputs.size() != c.in_shapes.size()) return false;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (c.placed[k]) continue;
    const Tensor* t = inputs[k];
    if (!t || !t->is_tensor() || t->dtype() != c.dtype || t->shape() != c.in_shapes[k]) {
      c.buffer = Tensor();  // the Concat kernel makes its own output
      return false;
    }
  }
  Tensor b = buffer(ci);
  for (size_t k = 0; k < inputs.size(); ++k)
    if (!c.placed[k] && inputs[k]->nbytes())
      std::memcpy(static_cast<char*>(b.raw()) + c.offsets[k], inputs[k]->raw(), inputs[k]->nbytes());
  *out = b;
  c.buffer = Tensor();  // the interpreter holds the output from here on
  return true;
}

}  // namespace kiln
