// Engine layers over exactly typed tensors (kernels_exact.h): integer / bool elementwise ops,
// Where with a runtime condition, Cast between any two storage types, Range, CumSum, Trilu.
// Each runs one launcher of Kiln's kernels (one tactic, source kKiln); ins/outs are set by the
// lowering. All tensors are row-major.
#pragma once

#include <memory>
#include <string>

#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/kernels_exact.h"

namespace kiln::cuda {

// The broadcast strides (elements) of a row-major operand of shape `in` read over the output
// shape `out` (numpy broadcasting: `in` right-aligned, 0 on its size-1 and missing dims).
// `out` of rank 0 counts as [1]. Errors: rank above kMaxRank, shapes that do not broadcast.
StatusOr<BroadcastDesc> broadcast_desc(const Shape& a, const Shape& b, const Shape& out);
StatusOr<std::vector<int64_t>> broadcast_strides(const Shape& in, const Shape& out);

// ins: a (, b for binary ops), both in `in_t`; out: y (bool or in_t, exact_op_is_predicate).
std::unique_ptr<Layer> make_exact_elementwise_layer(const std::string& op, ExactOp e, StorageType in_t,
                                                    const BroadcastDesc& d);
// ins: condition (bool), a, b (type t); out: y (type t).
std::unique_ptr<Layer> make_select_layer(const SelectDesc& s, StorageType t);
// ins: x (from); out: y (to), `count` elements.
std::unique_ptr<Layer> make_cast_layer(int64_t count, StorageType from, StorageType to);
// ins: x (float64); out: y (int32 / int64) through launch_saturating_cast.
std::unique_ptr<Layer> make_saturating_cast_layer(int64_t count, StorageType to);
// ins: start, delta (device scalars of type t); out: y of `count` elements.
std::unique_ptr<Layer> make_range_layer(int64_t count, StorageType t);
// ins: x; out: y, a [outer, n, inner] array of type t.
std::unique_ptr<Layer> make_cumsum_layer(int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                                         StorageType t);
// ins: x (, k: an int64 device scalar when k_runtime); out: y, a [batch, rows, cols] array of type t.
std::unique_ptr<Layer> make_trilu_layer(int64_t batch, int64_t rows, int64_t cols, int64_t k, bool k_runtime, bool upper,
                                        StorageType t);

}  // namespace kiln::cuda
