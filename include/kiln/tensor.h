// Tensor: a host-memory, dense, row-major (C-order) array with shared storage (public API:
// ExecutionContext::set_input / output take it). Copies are cheap (they share storage);
// clone() deep-copies. Packed 4-bit types store two elements
// per byte (element 0 in the low nibble). Storage is 64-byte aligned.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

using Shape = std::vector<int64_t>;

// Product of dims (1 for a scalar, rank 0); saturates at INT64_MAX instead of wrapping (sizes
// that must be valid go through core/checked_size.h, which names the tensor).
int64_t shape_numel(const Shape& s);
// "[1,3,224,224]"
std::string shape_str(const Shape& s);
// Row-major element strides of a shape.
std::vector<int64_t> shape_strides(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled storage for shape_numel(shape) elements. A shape past the limits of
  // core/checked_size.h or a failed allocation throws TensorAllocationError (kernels run inside
  // the interpreter, which turns it into a Status naming the node); code outside a kernel uses
  // allocate().
  Tensor(DataType dtype, Shape shape);
  // The same as a Status: InvalidArgument for a negative dim or a size past the limits,
  // OutOfMemory naming `what` and the bytes when the memory is not there.
  static StatusOr<Tensor> allocate(DataType dtype, Shape shape, const std::string& what);
  // Wraps external storage (not copied); `owner` keeps it alive.
  static Tensor wrap(DataType dtype, Shape shape, std::shared_ptr<void> owner, void* data);
  // A rank-0 tensor holding one value (T must match dtype's C type).
  template <typename T>
  static Tensor scalar(DataType dtype, T v) {
    Tensor t(dtype, {});
    *t.data<T>() = v;
    return t;
  }

  // ONNX sequence and optional values ride in a Tensor so the interpreter, kernels and
  // subgraph plumbing keep one value type (docs/decisions/0003-sequence-values.md). An optional
  // holding a value is that value; an empty one is none(). To tensor-only code both kinds look
  // like an empty 1-D tensor of the element dtype (no data to misread).
  enum class Kind : uint8_t { kTensor, kSequence, kNone };
  static Tensor sequence(DataType elem, std::vector<Tensor> items);
  static Tensor none(DataType elem = DataType::kUndefined);
  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_none() const { return kind_ == Kind::kNone; }
  // A sequence's elements (empty for other kinds); shared and immutable.
  const std::vector<Tensor>& items() const;

  bool defined() const { return dtype_ != DataType::kUndefined || kind_ != Kind::kTensor; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return dtype_storage_bytes(dtype_, numel()); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() { return static_cast<T*>(data_); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(data_); }

  // Same storage, new shape (numel must match; checked).
  Tensor reshaped(Shape shape) const;
  // A tensor over the contiguous bytes [byte_offset, byte_offset + nbytes) of this one's data,
  // sharing its storage (which stays alive while the view does): the slice of a concat output
  // that a producer fills in place. The bytes must lie inside this tensor (checked).
  Tensor view(size_t byte_offset, DataType dtype, Shape shape) const;
  // Deep copy.
  Tensor clone() const;
  // Bitwise equality of dtype, shape and bytes.
  bool bit_equal(const Tensor& other) const;

 private:
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  Kind kind_ = Kind::kTensor;
  std::shared_ptr<const std::vector<Tensor>> items_;
};

// Converts every element to double (any dtype but string); for comparisons and printing.
std::vector<double> tensor_to_doubles(const Tensor& t);
// Converts `t` to dtype `to` with ONNX Cast semantics (float->int truncates toward zero,
// float->fp8/fp16 rounds to nearest even, saturating for fp8 when `saturate`).
StatusOr<Tensor> cast_tensor(const Tensor& t, DataType to, bool saturate = true);

}  // namespace kiln
