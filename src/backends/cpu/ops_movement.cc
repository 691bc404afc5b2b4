// CPU reference kernels, movement family: registration and the helpers shared by the
// sub-family files (ops_movement_*.cc). Sub-families: shape (Reshape, Squeeze, Shape, ...),
// layout (Transpose, Expand, Tile, DepthToSpace, ...), slice (Concat, Split, Slice, Pad),
// gather, scatter, resize (Resize, Upsample) and select (NonZero, Compress, Unique, ...).
#include "backends/cpu/ops_movement_common.h"
#include "core/checked_size.h"

namespace kiln::cpu {
namespace movement {

StatusOr<std::vector<int64_t>> read_ints(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32)
    return ctx.fail(std::string(what) + " must be int32 or int64, got " + dtype_name(t.dtype()));
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == DataType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
  return v;
}

StatusOr<int> norm_axis(const KernelContext& ctx, int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return ctx.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                    std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Status check_out_shape(const KernelContext& ctx, const Shape& s) {
  // The limits of core/checked_size.h; memory beyond that is the allocation's OutOfMemory.
  auto n = checked_numel(s, "output shape");
  return n.ok() ? Status::Ok() : ctx.fail(n.status().message());
}

namespace {

template <int N>
struct Elem {
  unsigned char b[N];
};

template <int N>
void strided_copy_n(const Elem<N>* src, int64_t offset, const std::vector<int64_t>& strides, const Shape& shape,
                    Elem<N>* dst) {
  const int rank = static_cast<int>(shape.size());
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  if (rank == 0) {
    dst[0] = src[offset];
    return;
  }
  // Walk the outer dims with a counter; the innermost dim is a tight loop.
  const int64_t inner = shape[rank - 1], inner_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t base = offset;
  for (int64_t o = 0; o < n; o += inner) {
    const Elem<N>* s = src + base;
    if (inner_stride == 1) {
      std::memcpy(dst, s, static_cast<size_t>(inner) * N);
    } else {
      for (int64_t j = 0; j < inner; ++j) dst[j] = s[j * inner_stride];
    }
    dst += inner;
    for (int k = rank - 2; k >= 0; --k) {
      base += strides[k];
      if (++idx[k] < shape[k]) break;
      base -= strides[k] * shape[k];
      idx[k] = 0;
    }
  }
}

}  // namespace

void strided_copy(const void* src, int64_t offset, const std::vector<int64_t>& strides, const Shape& shape, void* dst,
                  int esize) {
  switch (esize) {
    case 1:
      return strided_copy_n(static_cast<const Elem<1>*>(src), offset, strides, shape, static_cast<Elem<1>*>(dst));
    case 2:
      return strided_copy_n(static_cast<const Elem<2>*>(src), offset, strides, shape, static_cast<Elem<2>*>(dst));
    case 4:
      return strided_copy_n(static_cast<const Elem<4>*>(src), offset, strides, shape, static_cast<Elem<4>*>(dst));
    case 8:
      return strided_copy_n(static_cast<const Elem<8>*>(src), offset, strides, shape, static_cast<Elem<8>*>(dst));
    default: {
      // Any other whole-byte size: element by element.
      const int64_t n = shape_numel(shape);
      const int rank = static_cast<int>(shape.size());
      std::vector<int64_t> idx(rank, 0);
      for (int64_t i = 0; i < n; ++i) {
        int64_t s = offset;
        for (int k = 0; k < rank; ++k) s += idx[k] * strides[k];
        copy_elem(src, s, dst, i, esize);
        for (int k = rank - 1; k >= 0; --k) {
          if (++idx[k] < shape[k]) break;
          idx[k] = 0;
        }
      }
    }
  }
}

}  // namespace movement

void register_movement_kernels(KernelRegistry& r) {
  movement::register_shape_kernels(r);
  movement::register_layout_kernels(r);
  movement::register_slice_kernels(r);
  movement::register_gather_kernels(r);
  movement::register_scatter_kernels(r);
  movement::register_resize_kernels(r);
  movement::register_select_kernels(r);
}

}  // namespace kiln::cpu
