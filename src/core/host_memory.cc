// Huge-page host mappings (see host_memory.h).
#include "core/host_memory.h"

#include <sys/mman.h>

#include <cstdint>

namespace kiln {

size_t huge_mapping_bytes(size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }

void* map_huge(size_t bytes) {
  const size_t len = huge_mapping_bytes(bytes);
  // Over-map by one huge page, then unmap the head and tail so the mapping starts on a 2 MiB
  // boundary (only aligned 2 MiB ranges can be huge pages).
  void* raw = ::mmap(nullptr, len + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (base + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > base) ::munmap(raw, aligned - base);
  const uintptr_t tail = aligned + len, end = base + len + kHugePageBytes;
  if (end > tail) ::munmap(reinterpret_cast<void*>(tail), end - tail);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  ::madvise(p, len, MADV_HUGEPAGE);  // advice only: without THP the mapping works on 4 KiB pages
#endif
  return p;
}

std::shared_ptr<void> huge_buffer(size_t bytes) {
  void* p = map_huge(bytes);
  if (!p) return nullptr;
  const size_t len = huge_mapping_bytes(bytes);
  return std::shared_ptr<void>(p, [len](void* q) { ::munmap(q, len); });
}

void advise_huge_pages(void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (b + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t hi = (b + bytes) / kHugePageBytes * kHugePageBytes;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace kiln
