// Checked element counts and byte sizes (see checked_size.h).
#include "core/checked_size.h"

#include <unistd.h>

namespace kiln {

bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

bool checked_add(int64_t a, int64_t b, int64_t* out) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

Status check_rank(size_t rank, const std::string& what) {
  if (rank <= static_cast<size_t>(kMaxTensorRank)) return Status::Ok();
  return invalid_argument(what + ": rank " + std::to_string(rank) + " is past Kiln's limit of " +
                          std::to_string(kMaxTensorRank));
}

StatusOr<int64_t> checked_numel(const Shape& shape, const std::string& what) {
  KILN_RETURN_IF_ERROR(check_rank(shape.size(), what));
  int64_t n = 1;
  bool too_big = false;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument(what + ": shape " + shape_str(shape) + " has a negative dimension");
    if (!too_big && (!checked_mul(n, d, &n) || n > kMaxTensorElements)) too_big = true;
  }
  // A zero dim makes the tensor empty however large the other dims are.
  for (int64_t d : shape)
    if (d == 0) return int64_t{0};
  if (too_big)
    return invalid_argument(what + ": shape " + shape_str(shape) + " has more than " +
                            std::to_string(kMaxTensorElements) + " elements (2^48, Kiln's limit per tensor)");
  return n;
}

StatusOr<int64_t> checked_nbytes(DataType dtype, const Shape& shape, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(int64_t n, checked_numel(shape, what));
  const int64_t bytes = static_cast<int64_t>(dtype_storage_bytes(dtype, n));  // n <= 2^48: no overflow
  if (bytes > kMaxTensorBytes)
    return invalid_argument(what + ": shape " + shape_str(shape) + " of " + dtype_name(dtype) + " needs " +
                            std::to_string(bytes) + " bytes, past Kiln's limit of 2^50 per tensor");
  return bytes;
}

int64_t physical_memory_bytes() {
  static const int64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{0};
  }();
  return bytes;
}

namespace {
int64_t g_allocation_limit = -1;  // -1: physical memory
}  // namespace

int64_t allocation_limit_bytes() { return g_allocation_limit >= 0 ? g_allocation_limit : physical_memory_bytes(); }

void set_allocation_limit_bytes(int64_t bytes) { g_allocation_limit = bytes; }

}  // namespace kiln
