// CPU reference kernels, elementwise family: the broadcasting shape rules shared by the
// family (ONNX docs/Broadcasting.md) and the family's registration, which calls one internal
// register function per file (unary math, activations, binary, variadic, Cast/Q/DQ).
#include "backends/cpu/ops_elementwise_broadcast.h"

namespace kiln::cpu {

StatusOr<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return invalid_argument("shapes " + shape_str(a) + " and " + shape_str(b) + " are not broadcast-compatible");
    }
  }
  return out;
}

StatusOr<Shape> broadcast_shapes(const std::vector<const Shape*>& shapes) {
  Shape out = shapes.empty() ? Shape{} : *shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(out, broadcast_shape(out, *shapes[i]));
  }
  return out;
}

StatusOr<Shape> legacy_broadcast_b_shape(const Shape& a, const Shape& b, bool has_axis, int64_t axis) {
  const int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  if (shape_numel(b) == 1) return Shape(a.size(), 1);
  if (rb > ra)
    return invalid_argument("legacy broadcast: B " + shape_str(b) + " has higher rank than A " + shape_str(a));
  if (!has_axis) axis = ra - rb;
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra)
    return invalid_argument("legacy broadcast: axis " + std::to_string(axis) + " does not fit B " + shape_str(b) +
                            " into A " + shape_str(a));
  Shape padded(a.size(), 1);
  for (int64_t i = 0; i < rb; ++i) {
    if (b[i] != a[axis + i] && b[i] != 1)
      return invalid_argument("legacy broadcast: B " + shape_str(b) + " does not match A " + shape_str(a) +
                              " at axis " + std::to_string(axis));
    padded[axis + i] = b[i];
  }
  return padded;
}

void register_elementwise_kernels(KernelRegistry& r) {
  register_elementwise_unary_kernels(r);
  register_elementwise_activation_kernels(r);
  register_elementwise_binary_kernels(r);
  register_elementwise_variadic_kernels(r);
  register_elementwise_quantize_kernels(r);
}

}  // namespace kiln::cpu
