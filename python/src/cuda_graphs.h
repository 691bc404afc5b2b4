// CUDA graphs for enqueue from Python (trtexec --useCudaGraph): one enqueue of a context is
// captured on a private stream, then replayed with cudaGraphLaunch on the caller's stream (the
// legacy default stream included, where capture itself is not allowed). A graph bakes in the
// bound addresses and shapes, so graphs are cached per (addresses, input shapes): reusing the
// same tensors (torch's caching allocator usually does) replays; new addresses capture again.
// Without the CUDA backend every call returns Unsupported.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/status.h"

namespace kiln::py {

class GraphCache {
 public:
  GraphCache();
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Launches the graph of `ctx`'s current bindings on `stream` (a cudaStream_t as an integer),
  // capturing it first when `key` (addresses and shapes) is new. At most kMaxGraphs are kept,
  // the oldest dropped first.
  Status launch(ExecutionContext& ctx, const std::vector<int64_t>& key, uintptr_t stream);
  void clear();
  size_t size() const;
  static constexpr size_t kMaxGraphs = 8;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::py
