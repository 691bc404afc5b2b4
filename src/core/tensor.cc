// Tensor storage and whole-tensor conversions.
#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/checked_size.h"
#include "core/host_memory.h"
#include "core/numerics.h"
#include "core/parallel.h"

namespace kiln {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d == 0) return 0;
    if (!checked_mul(n, d, &n)) n = INT64_MAX;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

std::vector<int64_t> shape_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

namespace {

// Zero-filled 64-byte aligned storage for `shape`, or the Status saying why not.
Status allocate_storage(DataType dtype, const Shape& shape, const std::string& what, std::shared_ptr<void>* storage) {
  auto bytes = checked_nbytes(dtype, shape, what);
  if (!bytes.ok()) return bytes.status();
  const int64_t alloc = std::max<int64_t>(64, (*bytes + 63) / 64 * 64);
  const int64_t limit = allocation_limit_bytes();
  auto oom = [&] {
    return Status(StatusCode::kOutOfMemory, what + ": cannot allocate " + std::to_string(*bytes) + " bytes for " +
                                                dtype_name(dtype) + " " + shape_str(shape) +
                                                (limit > 0 ? " (allocation limit " + std::to_string(limit) + " bytes)" : ""));
  };
  // Past physical memory, an overcommitted allocation would "succeed" and the memset below would
  // bring in the OOM killer; refuse it here instead.
  if (limit > 0 && alloc > limit) return oom();
  if (alloc >= kHugeAllocationBytes) {
    // Large tensors (weights, plan-sized buffers): their own anonymous mapping, which the kernel
    // zero-fills on first touch (no memset pass), on 2 MiB transparent huge pages where the
    // system allows them (madvise mode): a multi-GiB weight then faults in 512x fewer pages,
    // which dominated LLM builds (docs/decisions/0087).
    *storage = huge_buffer(static_cast<size_t>(alloc));
    if (!*storage) return oom();
    return Status::Ok();
  }
  void* p = std::aligned_alloc(64, static_cast<size_t>(alloc));
  if (!p) return oom();
  std::memset(p, 0, static_cast<size_t>(alloc));
  *storage = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return Status::Ok();
}

}  // namespace

Tensor::Tensor(DataType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  Status s = allocate_storage(dtype_, shape_, "tensor", &storage_);
  if (!s.ok()) throw TensorAllocationError(s.code(), s.message());
  data_ = storage_.get();
}

StatusOr<Tensor> Tensor::allocate(DataType dtype, Shape shape, const std::string& what) {
  Tensor t;
  KILN_RETURN_IF_ERROR(allocate_storage(dtype, shape, what, &t.storage_));
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::wrap(DataType dtype, Shape shape, std::shared_ptr<void> owner, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.storage_ = std::move(owner);
  t.data_ = data;
  return t;
}

Tensor Tensor::sequence(DataType elem, std::vector<Tensor> items) {
  Tensor t;
  t.dtype_ = elem;
  t.shape_ = {0};
  t.kind_ = Kind::kSequence;
  t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return t;
}

Tensor Tensor::none(DataType elem) {
  Tensor t;
  t.dtype_ = elem;
  t.shape_ = {0};
  t.kind_ = Kind::kNone;
  return t;
}

const std::vector<Tensor>& Tensor::items() const {
  static const std::vector<Tensor> kEmpty;
  return items_ ? *items_ : kEmpty;
}

Tensor Tensor::reshaped(Shape shape) const {
  KILN_CHECK(shape_numel(shape) == numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::view(size_t byte_offset, DataType dtype, Shape shape) const {
  KILN_CHECK(is_tensor());
  KILN_CHECK(byte_offset + dtype_storage_bytes(dtype, shape_numel(shape)) <= nbytes());
  return wrap(dtype, std::move(shape), storage_, static_cast<char*>(data_) + byte_offset);
}

Tensor Tensor::clone() const {
  if (!is_tensor()) return *this;  // sequence elements are immutable and shared
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

bool Tensor::bit_equal(const Tensor& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_ || kind_ != o.kind_) return false;
  if (is_sequence()) {
    if (items().size() != o.items().size()) return false;
    for (size_t i = 0; i < items().size(); ++i)
      if (!items()[i].bit_equal(o.items()[i])) return false;
    return true;
  }
  return nbytes() == 0 || std::memcmp(data_, o.data_, nbytes()) == 0;
}

std::vector<double> tensor_to_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = load_as_double(t.dtype(), t.raw(), i);
  return out;
}

StatusOr<Tensor> cast_tensor(const Tensor& t, DataType to, bool saturate) {
  if (t.dtype() == DataType::kString || to == DataType::kString)
    return unsupported("cast between string and numeric tensors is not supported");
  Tensor out(to, t.shape());
  const int64_t n = t.numel();
  if (t.dtype() == to) return t.clone();
  if (to == DataType::kFloat32 && (t.dtype() == DataType::kFloat16 || t.dtype() == DataType::kBFloat16)) {
    // Widening is exact: the bulk conversion on several threads (checkpoint weights, GiBs).
    const auto* src = static_cast<const uint16_t*>(t.raw());
    float* dst = out.data<float>();
    const bool half = t.dtype() == DataType::kFloat16;
    parallel_for(n, n, [&](int64_t b, int64_t e) {
      if (half) fp16_to_float_n(src + b, dst + b, e - b);
      else bf16_to_float_n(src + b, dst + b, e - b);
    });
    return out;
  }
  const bool src_int = dtype_is_integer(t.dtype()) || t.dtype() == DataType::kBool;
  const bool dst_int = dtype_is_integer(to) || to == DataType::kBool;
  if (src_int && dst_int) {
    // Integer to integer: wrap modulo 2^bits like C++ conversions (ONNX Cast semantics).
    for (int64_t i = 0; i < n; ++i) store_from_int64(to, out.raw(), i, load_as_int64(t.dtype(), t.raw(), i));
    return out;
  }
  for (int64_t i = 0; i < n; ++i) store_from_double(to, out.raw(), i, load_as_double(t.dtype(), t.raw(), i), saturate);
  return out;
}

}  // namespace kiln
