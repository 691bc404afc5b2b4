// CPU reference kernels, control family: registers the sub-families (control flow, RNNs,
// signal, vision) and holds the small helpers they share.
#include "backends/cpu/ops_control.h"

#include "core/numerics.h"

namespace kiln::cpu {

std::vector<double> control_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = load_as_double(t.dtype(), t.raw(), i);
  return v;
}

Tensor control_tensor_from(DataType dt, const Shape& shape, const std::vector<double>& v) {
  Tensor t(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_double(dt, t.raw(), i, v[i]);
  return t;
}

void register_control_kernels(KernelRegistry& r) {
  register_control_flow_kernels(r);
  register_control_rnn_kernels(r);
  register_control_signal_kernels(r);
  register_control_vision_kernels(r);
}

}  // namespace kiln::cpu
