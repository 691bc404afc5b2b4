// GatherND and GatherElements on the CUDA path: build-time planning (node + concrete shapes ->
// the kernel descriptors of kernels_gather.h, errors naming the node), the host check of
// constant indices, and the layers that run launch_gather_nd / launch_gather_elements. Data and
// output are row-major in any storage type (the bits are copied: float, int32, int64, bool).
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/kernels_gather.h"
#include "ir/graph.h"

namespace kiln::cuda {

// ONNX GatherND (opset 11; batch_dims from 12) of `data` by `indices` (their concrete shapes).
// Errors (naming the node): rank-0 data or indices, batch_dims outside [0, min rank), a tuple
// length m outside [1, rank(data) - batch_dims], batch dims of data and indices that differ;
// unsupported: m above kMaxRank.
StatusOr<GatherNDDesc> plan_gather_nd(const ir::Node& n, const Shape& data, const Shape& indices);

// ONNX GatherElements (opset 11 / 13, `axis` negative counting from the end). Errors: ranks that
// differ, a non-axis dim of indices larger than data's, an axis out of range; unsupported: rank
// 0 or above kMaxRank.
StatusOr<GatherElementsDesc> plan_gather_elements(const ir::Node& n, const Shape& data, const Shape& indices);

// Constant indices (row-major, as the node holds them) checked on the host like the CPU
// reference: an index outside its dim is an error naming the node and the index; negative ones
// are normalized (counted from the end). The kernels then see only in-range indices.
Status normalize_gather_nd_indices(const ir::Node& n, const GatherNDDesc& d, std::vector<int64_t>* idx);
Status normalize_gather_elements_indices(const ir::Node& n, const GatherElementsDesc& d, std::vector<int64_t>* idx);

// ScatterElements / Scatter (`axis`) and ScatterND of `data` by `indices` with `updates` (concrete
// shapes): the gather descriptors of data and indices (the scatter kernels address data as the
// gathers do), after the CPU reference's checks (errors naming the node): updates of
// ScatterElements must have the shape of indices; those of ScatterND indices.shape[:-1] +
// data.shape[m:]. `reduce` receives the `reduction` attribute (none / add / mul / max / min;
// another is an error).
StatusOr<GatherElementsDesc> plan_scatter_elements(const ir::Node& n, const Shape& data, const Shape& indices,
                                                   const Shape& updates, ScatterReduce* reduce);
StatusOr<GatherNDDesc> plan_scatter_nd(const ir::Node& n, const Shape& data, const Shape& indices,
                                       const Shape& updates, ScatterReduce* reduce);

// ins: data, indices (int64 when idx_64, else int32); out: y. Elements of `elem_bytes` bytes.
std::unique_ptr<Layer> make_gather_nd_layer(const GatherNDDesc& d, int elem_bytes, bool idx_64);
std::unique_ptr<Layer> make_gather_elements_layer(const GatherElementsDesc& d, int elem_bytes, bool idx_64);
// ins: data, indices (int64 when idx_64, else int32), updates; out: y of data's `count` elements
// in storage `t` (launch_scatter_elements / launch_scatter_nd).
std::unique_ptr<Layer> make_scatter_elements_layer(const GatherElementsDesc& d, int64_t count, StorageType t,
                                                   ScatterReduce r, bool idx_64);
std::unique_ptr<Layer> make_scatter_nd_layer(const GatherNDDesc& d, int64_t count, StorageType t, ScatterReduce r,
                                             bool idx_64);

}  // namespace kiln::cuda
