// Encodes an ir::Graph (values, nodes, attributes, nested subgraphs) into the plan's "graph"
// section, with constant tensors placed in the "weights" section. Ops and dtypes are written
// by name, never by enum value, so reordering ops.def or DataType cannot corrupt old plans.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "plan/byte_io.h"

namespace kiln::plan {

// Collects constant tensors at 64-byte aligned offsets; a tensor shared by several values is
// stored once.
// The weights section as it is encoded: each constant's bytes are referenced, not copied, until
// write_to appends the whole section once (an LLM plan's weights are GiBs; a growing copy of them
// cost seconds and doubled the build's peak memory). The referenced bytes (the plan's tensors and
// packed weights) must outlive write_to.
class WeightsWriter {
 public:
  uint64_t add(const Tensor& t);  // offset in the weights section (one per distinct buffer)
  uint64_t add_bytes(const uint8_t* data, size_t bytes);  // raw bytes (packed weights), not deduplicated
  uint64_t size() const { return size_; }  // the section's bytes
  // Appends the section to `out`: every added buffer at its offset (relative to where the section
  // starts, which must be kAlign-aligned in `out`), zeros between.
  void write_to(ByteWriter& out) const;

 private:
  uint64_t place(const uint8_t* data, size_t bytes);
  struct Chunk {
    const uint8_t* data;
    size_t bytes;
    uint64_t offset;
  };
  std::vector<Chunk> chunks_;
  uint64_t size_ = 0;
  std::map<std::pair<const void*, size_t>, uint64_t> seen_;
};

// The weights section after loading: one aligned buffer the constants wrap (no copies).
struct WeightsView {
  std::shared_ptr<void> owner;
  uint8_t* data = nullptr;
  uint64_t size = 0;
};

// The offset of a constant the plan stores only packed (Plan::elided_constants): its tensor
// keeps dtype and shape, and reads as zeros after loading (a read-only anonymous mapping, no
// memory behind it); the CUDA lowering takes its packed bytes instead.
constexpr uint64_t kElidedOffset = ~uint64_t{0};

// `elided` (sorted value ids of `g`, top-level graph only) are written with kElidedOffset.
void encode_graph(const ir::Graph& g, ByteWriter& w, WeightsWriter& weights,
                  const std::vector<ir::ValueId>* elided = nullptr);
// Decodes and validates one graph; `depth` counts enclosing graphs (bounded, so a corrupt plan
// cannot recurse without end). Errors go to `r` (sticky); the result is valid only if r.ok().
// With `elided`, constants written with kElidedOffset are allowed (top-level graph only) and
// their value ids collected there (with their bytes in `elided_bytes`); without, they are errors.
std::shared_ptr<ir::Graph> decode_graph(ByteReader& r, const WeightsView& weights, int depth,
                                        std::vector<ir::ValueId>* elided = nullptr, uint64_t* elided_bytes = nullptr);

}  // namespace kiln::plan
