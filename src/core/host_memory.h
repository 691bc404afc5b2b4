// Host memory for large buffers (tensors from kHugeAllocationBytes up, plan images, weight
// buffers): 2 MiB transparent huge pages where the system allows them (Linux THP "madvise" or
// "always"), so a multi-GiB buffer faults in 512x fewer pages (docs/decisions/0087).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kiln {

constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr int64_t kHugeAllocationBytes = int64_t{4} << 20;
// `bytes` rounded up to whole huge pages (the length map_huge maps).
size_t huge_mapping_bytes(size_t bytes);
// A zero-filled anonymous read-write mapping of huge_mapping_bytes(bytes) bytes, 2 MiB aligned
// and advised MADV_HUGEPAGE; nullptr when the system refuses it. Free with
// munmap(p, huge_mapping_bytes(bytes)).
void* map_huge(size_t bytes);
// map_huge(bytes) owned by the returned pointer, which unmaps it when the last owner goes (the
// storage of large tensors and loaded plans); null when the system refuses the mapping.
std::shared_ptr<void> huge_buffer(size_t bytes);
// madvise(MADV_HUGEPAGE) on the 2 MiB-aligned pages inside [p, p + bytes) of an anonymous
// mapping (a large std::vector's buffer before it is first written); a no-op elsewhere.
void advise_huge_pages(void* p, size_t bytes);

}  // namespace kiln
