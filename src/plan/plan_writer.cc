// Serializes a Plan (layout in kiln/plan.h): header, section table, then the graph, profiles,
// layers, build and weights sections at 64-byte aligned offsets, then the checksum.
// Deterministic: the same Plan always gives the same bytes.
#include <cstring>

#include "plan/graph_codec.h"
#include "plan/plan_format.h"

namespace kiln::plan {
namespace {

constexpr uint32_t kFlagFp16 = 1, kFlagBf16 = 2, kFlagTf32 = 4, kFlagFp8 = 8, kFlagInt8 = 16;

void encode_profiles(const std::vector<OptimizationProfile>& profiles, ByteWriter& w) {
  w.u32(static_cast<uint32_t>(profiles.size()));
  for (const OptimizationProfile& p : profiles) {
    w.u32(static_cast<uint32_t>(p.ranges().size()));
    for (const auto& [name, r] : p.ranges()) {
      w.str(name);
      w.u32(static_cast<uint32_t>(r.min.size()));
      for (const Shape* s : {&r.min, &r.opt, &r.max})
        for (int64_t d : *s) w.i64(d);
    }
  }
}

void store_u64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

uint32_t build_flags(const BuildSettings& b) {
  const PrecisionConfig& p = b.precision;
  return (p.fp16 ? kFlagFp16 : 0) | (p.bf16 ? kFlagBf16 : 0) | (p.tf32 ? kFlagTf32 : 0) | (p.fp8 ? kFlagFp8 : 0) |
         (p.int8 ? kFlagInt8 : 0);
}

BuildSettings settings_from_flags(uint32_t flags) {
  BuildSettings b;
  b.precision.fp16 = flags & kFlagFp16;
  b.precision.bf16 = flags & kFlagBf16;
  b.precision.tf32 = flags & kFlagTf32;
  b.precision.fp8 = flags & kFlagFp8;
  b.precision.int8 = flags & kFlagInt8;
  return b;
}

std::vector<uint8_t> write_plan(const Plan& p) {
  KILN_CHECK(p.tactics.size() == p.graph.nodes.size());
  WeightsWriter weights;
  ByteWriter graph, profiles, layers, build;
  encode_graph(p.graph, graph, weights, &p.elided_constants);
  encode_profiles(p.profiles, profiles);
  layers.u32(static_cast<uint32_t>(p.tactics.size()));
  for (const PlanTactic& t : p.tactics) {
    layers.str(t.name);
    layers.u32(t.id);
    layers.f64(t.tuned_ms);
  }
  layers.u32(static_cast<uint32_t>(p.tactic_data.size()));
  for (const auto& [key, bytes] : p.tactic_data) {
    layers.str(key);
    layers.blob(bytes);
  }
  layers.u32(static_cast<uint32_t>(p.packed_weights.size()));
  for (const auto& [key, blob] : p.packed_weights) {
    layers.str(key);
    layers.u64(weights.add_bytes(blob.data, blob.bytes));
    layers.u64(blob.bytes);
  }
  layers.u32(static_cast<uint32_t>(p.elided_constants.size()));
  for (ir::ValueId v : p.elided_constants) layers.i32(v);
  layers.u32(static_cast<uint32_t>(p.shape_tactics.size()));
  for (const Plan::ShapeTactics& set : p.shape_tactics) {
    layers.u32(static_cast<uint32_t>(set.shapes.size()));
    for (const Shape& s : set.shapes) {
      layers.u32(static_cast<uint32_t>(s.size()));
      for (int64_t d : s) layers.i64(d);
    }
    layers.u32(static_cast<uint32_t>(set.layers.size()));
    for (const auto& [name, t] : set.layers) {
      layers.str(name);
      layers.u32(t.id);
      layers.f64(t.tuned_ms);
    }
  }
  build.u32(build_flags(p.build));
  build.i32(p.build.opt_level);
  build.u64(p.build.workspace_limit);
  build.i32(p.build.max_aux_streams);

  // The weights section (nullptr below) is appended straight from the plan's buffers.
  const std::pair<SectionTag, ByteWriter*> sections[] = {{SectionTag::kGraph, &graph},
                                                         {SectionTag::kProfiles, &profiles},
                                                         {SectionTag::kLayers, &layers},
                                                         {SectionTag::kBuild, &build},
                                                         {SectionTag::kWeights, nullptr}};
  auto section_size = [&](const ByteWriter* w) -> uint64_t { return w ? w->size() : weights.size(); };
  constexpr uint32_t kCount = 5;
  const size_t header_size = (kOffSectionTable + kCount * kSectionEntryBytes + kAlign - 1) / kAlign * kAlign;
  uint64_t total = header_size;
  for (const auto& [tag, w] : sections) total = (total + kAlign - 1) / kAlign * kAlign + section_size(w);
  ByteWriter out;
  out.reserve_more(static_cast<size_t>(total));  // one allocation for the whole plan
  out.raw(kMagic, kMagicBytes);
  out.u32(p.header.format_version);
  out.u32(static_cast<uint32_t>(header_size));
  char version[kKilnVersionBytes] = {};
  std::memcpy(version, p.header.kiln_version.data(), std::min(p.header.kiln_version.size(), kKilnVersionBytes - 1));
  out.raw(version, kKilnVersionBytes);
  out.u8(static_cast<uint8_t>(p.header.target.backend));
  out.u8(0);
  out.u8(0);
  out.u8(0);
  out.u32(p.header.target.cc_major);
  out.u32(p.header.target.cc_minor);
  out.u32(p.header.target.cudnn_version);
  out.u32(p.header.target.cublaslt_version);
  out.u32(kCount);
  out.u64(0);  // payload length, patched below
  out.u64(0);  // checksum, patched below
  // Section table: offsets follow from the aligned sizes.
  uint64_t off = header_size;
  for (const auto& [tag, w] : sections) {
    out.u32(static_cast<uint32_t>(tag));
    out.u32(0);
    out.u64(off);
    out.u64(section_size(w));
    off = (off + section_size(w) + kAlign - 1) / kAlign * kAlign;
  }
  for (const auto& [tag, w] : sections) {
    out.pad_to(kAlign);
    if (w) out.raw(w->bytes().data(), w->size());
    else weights.write_to(out);
  }
  std::vector<uint8_t>& b = out.bytes();
  store_u64(b, kOffPayloadLength, b.size() - header_size);
  store_u64(b, kOffChecksum, plan_checksum(b.data(), b.size()));
  return std::move(b);
}

}  // namespace kiln::plan
