// Checked sizes: the one place that turns a shape into an element count or a byte size with
// overflow checks. Shape inference, the profile resolver, tensor allocation and every kernel
// entry (through Tensor's allocation) go through it, so a dimension or product past the
// documented limit is an error naming the tensor instead of a wrapped int64 (docs/decisions/0025).
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "core/tensor.h"
#include "kiln/status.h"

namespace kiln {

// Largest element count of one tensor (2^48, ~2.8e14): far above any real model, far below
// where int64 index arithmetic (numel * 8-byte strides, offsets + extents) could overflow.
constexpr int64_t kMaxTensorElements = int64_t{1} << 48;
// Largest byte size of one tensor (2^50 bytes = 1 PiB).
constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;
// Largest rank of one tensor (the plan format's limit, plan::kMaxRank).
constexpr int kMaxTensorRank = 64;

// a * b into *out unless it overflows int64 (then false, *out unchanged).
bool checked_mul(int64_t a, int64_t b, int64_t* out);
// a + b into *out unless it overflows int64.
bool checked_add(int64_t a, int64_t b, int64_t* out);

// InvalidArgument naming `what` when `rank` passes kMaxTensorRank.
Status check_rank(size_t rank, const std::string& what);
// Element count of `shape`, or InvalidArgument naming `what` ("input 'x'", "node 'c' (Conv)
// output 0") when a dim is negative, the rank passes kMaxTensorRank or the product passes
// kMaxTensorElements.
StatusOr<int64_t> checked_numel(const Shape& shape, const std::string& what);
// Storage bytes of `shape` in `dtype` (packed 4-bit types: two per byte), or InvalidArgument
// naming `what` past kMaxTensorElements / kMaxTensorBytes.
StatusOr<int64_t> checked_nbytes(DataType dtype, const Shape& shape, const std::string& what);

// Bytes of physical memory on this machine (0 when unknown); an allocation larger than this
// cannot succeed and is refused up front rather than left to the kernel's OOM killer.
int64_t physical_memory_bytes();

// The largest single tensor allocation this process makes: physical memory by default; a
// process that must stay smaller (a fuzz harness under libFuzzer's malloc limit) sets its own.
// Past it, allocation is an OutOfMemory error naming the tensor. Not thread-safe to change while
// other threads allocate; set it once at start-up.
int64_t allocation_limit_bytes();
void set_allocation_limit_bytes(int64_t bytes);

// Thrown by Tensor's allocating constructor when a shape is too large or the allocation fails
// (the constructor cannot return a Status). Never crosses the public API: the interpreter
// catches it around each kernel (naming the node) and the Builder / ExecutionContext entry
// points turn it into an OutOfMemory / InvalidArgument Status.
class TensorAllocationError : public std::exception {
 public:
  TensorAllocationError(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  Status status() const { return Status(code_, message_); }

 private:
  StatusCode code_;
  std::string message_;
};

}  // namespace kiln
