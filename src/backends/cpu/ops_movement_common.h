// Shared helpers of the CPU movement family (ops_movement_*.cc): reading shape-like int
// tensors, normalizing axes, and dtype-agnostic element copies. Movement kernels move
// elements by their byte size (dtype_bits / 8) instead of templating on every dtype, so one
// code path serves float32 ... fp8 and bool alike.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "core/numerics.h"

namespace kiln::cpu::movement {

// Bytes per element, or 0 for layouts that are not byte-addressable (packed 4-bit, string).
inline int elem_bytes(DataType t) {
  if (t == DataType::kString || t == DataType::kUndefined) return 0;
  const int bits = dtype_bits(t);
  return bits % 8 == 0 ? bits / 8 : 0;
}

// Element size of `t` for a kernel that copies elements, or an "unsupported" error.
inline StatusOr<int> copy_elem_bytes(const KernelContext& ctx, const Tensor& t) {
  const int b = elem_bytes(t.dtype());
  if (b == 0) return ctx.unsupported_here(std::string("dtype ") + dtype_name(t.dtype()) + " is not supported here");
  return b;
}

// The values of an int32/int64 tensor (any rank) as int64.
StatusOr<std::vector<int64_t>> read_ints(const KernelContext& ctx, const Tensor& t, const char* what);

// Normalizes `axis` (negative counts from the back) against `rank`; fails when out of range.
StatusOr<int> norm_axis(const KernelContext& ctx, int64_t axis, int rank, const char* what = "axis");

// Fails unless every dim is >= 0 and the element count stays below a sane bound (2^34), so a
// hostile shape input (Expand, Tile, ConstantOfShape, Resize sizes) cannot abort on allocation.
Status check_out_shape(const KernelContext& ctx, const Shape& s);

// Copies `esize`-byte elements: out[i] = src[offset + sum_k idx_k(i) * strides[k]] for every
// output index i of `shape` (row-major). Strides are in elements and may be zero or negative;
// this one routine implements Transpose, Slice, Expand, Tile and DepthToSpace.
void strided_copy(const void* src, int64_t offset, const std::vector<int64_t>& strides, const Shape& shape, void* dst,
                  int esize);

// Copies element `si` of `src` to element `di` of `dst`.
inline void copy_elem(const void* src, int64_t si, void* dst, int64_t di, int esize) {
  std::memcpy(static_cast<char*>(dst) + di * esize, static_cast<const char*>(src) + si * esize, esize);
}

// Registers `F` behind a check that inputs [0, N) are present, so kernels may call ctx.in(i)
// for i < N without a null check.
template <KernelFn F, int N>
Status with_inputs(KernelContext& ctx) {
  Status s = ctx.require_inputs(N);
  return s.ok() ? F(ctx) : s;
}

// Internal per-sub-family registration (called from register_movement_kernels).
void register_shape_kernels(KernelRegistry& r);    // ops_movement_shape.cc
void register_layout_kernels(KernelRegistry& r);   // ops_movement_layout.cc
void register_slice_kernels(KernelRegistry& r);    // ops_movement_slice.cc
void register_gather_kernels(KernelRegistry& r);   // ops_movement_gather.cc
void register_scatter_kernels(KernelRegistry& r);  // ops_movement_scatter.cc
void register_resize_kernels(KernelRegistry& r);   // ops_movement_resize.cc
void register_select_kernels(KernelRegistry& r);   // ops_movement_select.cc

}  // namespace kiln::cpu::movement
