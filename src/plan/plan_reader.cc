// Parses and validates a plan (see plan_format.h): header and checksum first, then each
// section with a bounds-checked reader; every section must be consumed exactly.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/checked_size.h"
#include "plan/graph_codec.h"
#include "plan/plan_format.h"

namespace kiln::plan {
static_assert(kMaxRank == static_cast<uint32_t>(kMaxTensorRank), "the plan's rank limit is core/checked_size.h's");

namespace {

const SectionEntry& find_section(const std::vector<SectionEntry>& sections, SectionTag tag) {
  for (const SectionEntry& s : sections)
    if (s.tag == tag) return s;
  KILN_CHECK(false);  // parse_header guarantees every tag is present
  return sections.front();
}

Status check_consumed(const ByteReader& r) {
  if (r.remaining() == 0) return Status::Ok();
  return invalid_plan("plan section '" + r.section() + "': " + std::to_string(r.remaining()) +
                      " unexpected bytes after its last field");
}

const ir::Value* find_input(const ir::Graph& g, const std::string& name) {
  for (ir::ValueId v : g.inputs)
    if (g.value(v).name == name) return &g.value(v);
  return nullptr;
}

void decode_profiles(ByteReader& r, const ir::Graph& g, std::vector<OptimizationProfile>* out) {
  const uint32_t n = r.count("profiles", 4);
  if (r.ok() && n == 0) r.fail("profiles", "the plan has no optimization profile");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    OptimizationProfile prof;
    const std::string where = "profile " + std::to_string(i);
    const uint32_t m = r.count("profile.ranges", 8);
    for (uint32_t k = 0; k < m && r.ok(); ++k) {
      const std::string name = r.str("range.input");
      const uint32_t rank = r.count("range.rank", 24);
      if (!r.ok()) break;
      if (rank > kMaxRank) {
        r.fail("range.rank", where + " input '" + name + "': rank " + std::to_string(rank));
        break;
      }
      Shape s[3];
      for (Shape& shape : s)
        for (uint32_t d = 0; d < rank; ++d) shape.push_back(r.i64("range.dims"));
      if (!r.ok()) break;
      const ir::Value* in = find_input(g, name);
      if (!in) {
        r.fail("range.input", where + " names '" + name + "', which is not an input of the graph");
        break;
      }
      Status st = prof.set_dimensions(name, s[0], s[1], s[2]);
      if (!st.ok()) {
        r.fail("range.dims", where + ": " + st.message());
        break;
      }
      auto bytes = checked_nbytes(in->dtype == DataType::kUndefined ? DataType::kFloat32 : in->dtype, s[2],
                                  where + " input '" + name + "' max shape");
      if (!bytes.ok()) {
        r.fail("range.dims", bytes.status().message());
        break;
      }
      if (in->shape) {
        bool ok = in->shape->size() == rank;
        for (uint32_t d = 0; ok && d < rank; ++d)
          if ((*in->shape)[d].is_known()) ok = s[0][d] == (*in->shape)[d].value && s[2][d] == (*in->shape)[d].value;
        if (!ok)
          r.fail("range.dims", where + " input '" + name + "': range " + shape_str(s[0]) + ".." + shape_str(s[2]) +
                                   " does not fit the declared shape " + ir::sym_shape_str(*in->shape));
      }
    }
    for (ir::ValueId v : g.inputs) {
      if (r.ok() && !prof.find(g.value(v).name))
        r.fail("profile.ranges", where + " has no range for input '" + g.value(v).name + "'");
    }
    out->push_back(std::move(prof));
  }
}

// The packed-weights table and the elided-constant list (Plan::packed_weights).
void decode_packed(ByteReader& r, const ir::Graph& g, const WeightsView& wv, Plan* p) {
  std::set<std::string> layers;
  for (const ir::Node& n : g.nodes) layers.insert(n.name);
  const uint32_t n = r.count("packed_weights", 20);  // each: key length, offset, bytes
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    std::string key = r.str("packed_weights.key");
    const uint64_t offset = r.u64("packed_weights.offset");
    const uint64_t bytes = r.u64("packed_weights.bytes");
    if (!r.ok()) break;
    const std::string layer = Plan::packed_key_layer(key);
    if (layer.empty() || !layers.count(layer)) {
      r.fail("packed_weights.key", "'" + key + "' does not name a layer of the graph");
      break;
    }
    if (offset % kAlign != 0 || offset > wv.size || bytes > wv.size - offset) {
      r.fail("packed_weights.offset", "'" + key + "': bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                          ") are not a 64-byte aligned range of the " + std::to_string(wv.size) +
                                          "-byte weights section");
      break;
    }
    Plan::PackedBlob b{wv.owner, wv.data + offset, bytes};
    if (!p->packed_weights.emplace(std::move(key), std::move(b)).second) {
      r.fail("packed_weights.key", "duplicate key");
      break;
    }
  }
  const uint32_t m = r.count("elided_constants", 4);
  for (uint32_t i = 0; i < m && r.ok(); ++i) {
    const ir::ValueId v = r.i32("elided_constants");
    if (!r.ok()) break;
    if (v < 0 || static_cast<size_t>(v) >= g.values.size() || !g.value(v).constant ||
        (!p->elided_constants.empty() && v <= p->elided_constants.back())) {
      r.fail("elided_constants", "value id " + std::to_string(v) + " is not a constant of the graph in ascending order");
      break;
    }
    p->elided_constants.push_back(v);
  }
}

// Plan::shape_tactics: each set's shapes inside profile 0, every entry named.
void decode_shape_tactics(ByteReader& r, const ir::Graph& g, const std::vector<OptimizationProfile>& profiles, Plan* p) {
  const uint32_t n = r.count("shape_tactics", 8);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    Plan::ShapeTactics set;
    const std::string where = "shape tactic set " + std::to_string(i);
    const uint32_t inputs = r.count("shape_tactics.inputs", 4);
    if (r.ok() && inputs != g.inputs.size()) {
      r.fail("shape_tactics.inputs", where + " has " + std::to_string(inputs) + " shapes for " +
                                         std::to_string(g.inputs.size()) + " graph inputs");
      break;
    }
    for (uint32_t k = 0; k < inputs && r.ok(); ++k) {
      const uint32_t rank = r.count("shape_tactics.rank", 8);
      if (!r.ok()) break;
      if (rank > kMaxRank) {
        r.fail("shape_tactics.rank", where + ": rank " + std::to_string(rank));
        break;
      }
      Shape s;
      for (uint32_t d = 0; d < rank; ++d) s.push_back(r.i64("shape_tactics.dims"));
      if (!r.ok()) break;
      const std::string& name = g.value(g.inputs[k]).name;
      const ShapeRange* range = profiles.empty() ? nullptr : profiles[0].find(name);
      bool inside = range && range->min.size() == s.size();
      for (size_t d = 0; inside && d < s.size(); ++d) inside = s[d] >= range->min[d] && s[d] <= range->max[d];
      if (!inside) {
        r.fail("shape_tactics.dims", where + ": " + shape_str(s) + " for input '" + name + "' is outside profile 0");
        break;
      }
      set.shapes.push_back(std::move(s));
    }
    const uint32_t entries = r.count("shape_tactics.layers", 16);
    for (uint32_t k = 0; k < entries && r.ok(); ++k) {
      std::string name = r.str("shape_tactics.layer");
      PlanTactic t;
      t.id = r.u32("shape_tactics.tactic_id");
      t.tuned_ms = r.f64("shape_tactics.tuned_ms");
      if (!r.ok()) break;
      if (name.empty() || !(t.tuned_ms >= 0 && t.tuned_ms < 1e9)) {
        r.fail("shape_tactics.layer", where + ": entry " + std::to_string(k) + " has no layer name or tuned time " +
                                          std::to_string(t.tuned_ms));
        break;
      }
      set.layers.emplace_back(std::move(name), std::move(t));
    }
    p->shape_tactics.push_back(std::move(set));
  }
}

}  // namespace

StatusOr<Plan> read_plan(const uint8_t* data, size_t size, std::shared_ptr<void> owner) {
  Plan p;
  std::vector<SectionEntry> sections;
  KILN_RETURN_IF_ERROR(parse_header(data, size, &p.header, &sections));

  // Weights: shared in place from an aligned, owned buffer (sections start at 64-byte offsets),
  // else one aligned copy that every constant tensor of the engine shares.
  const SectionEntry& ws = find_section(sections, SectionTag::kWeights);
  WeightsView weights;
  if (owner && reinterpret_cast<uintptr_t>(data) % kAlign == 0) {
    weights = WeightsView{std::move(owner), const_cast<uint8_t*>(data + ws.offset), ws.length};
  } else {
    const size_t alloc = (std::max<uint64_t>(ws.length, 1) + kAlign - 1) / kAlign * kAlign;
    void* buf = std::aligned_alloc(kAlign, alloc);
    if (!buf)
      return Status(StatusCode::kOutOfMemory, "cannot allocate " + std::to_string(alloc) + " bytes for the plan's weights");
    std::memcpy(buf, data + ws.offset, ws.length);
    weights = WeightsView{std::shared_ptr<void>(buf, [](void* q) { std::free(q); }), static_cast<uint8_t*>(buf), ws.length};
  }
  p.weights_bytes = ws.length;

  const SectionEntry& gs = find_section(sections, SectionTag::kGraph);
  ByteReader gr(data + gs.offset, gs.length, "graph");
  std::vector<ir::ValueId> elided;
  uint64_t elided_bytes = 0;
  auto graph = decode_graph(gr, weights, 0, &elided, &elided_bytes);
  KILN_RETURN_IF_ERROR(gr.status());
  KILN_RETURN_IF_ERROR(check_consumed(gr));
  p.graph = std::move(*graph);

  const SectionEntry& ps = find_section(sections, SectionTag::kProfiles);
  ByteReader pr(data + ps.offset, ps.length, "profiles");
  decode_profiles(pr, p.graph, &p.profiles);
  KILN_RETURN_IF_ERROR(pr.status());
  KILN_RETURN_IF_ERROR(check_consumed(pr));

  const SectionEntry& ls = find_section(sections, SectionTag::kLayers);
  ByteReader lr(data + ls.offset, ls.length, "layers");
  const uint32_t num_layers = lr.count("layers", 16);  // each at least: str length, id, tuned ms
  if (lr.ok() && num_layers != p.graph.nodes.size())
    lr.fail("layers", std::to_string(num_layers) + " layers, but the graph has " + std::to_string(p.graph.nodes.size()) +
                          " nodes");
  for (uint32_t i = 0; i < num_layers && lr.ok(); ++i) {
    PlanTactic t;
    t.name = lr.str("layer.tactic");
    t.id = lr.u32("layer.tactic_id");
    t.tuned_ms = lr.f64("layer.tuned_ms");
    if (lr.ok() && t.name.empty()) lr.fail("layer.tactic", "layer " + std::to_string(i) + " has no tactic");
    if (lr.ok() && !(t.tuned_ms >= 0 && t.tuned_ms < 1e9))
      lr.fail("layer.tuned_ms", "layer " + std::to_string(i) + " has tuned time " + std::to_string(t.tuned_ms));
    p.tactics.push_back(std::move(t));
  }
  const uint32_t num_data = lr.count("tactic_data", 12);
  for (uint32_t i = 0; i < num_data && lr.ok(); ++i) {
    std::string key = lr.str("tactic_data.key");
    std::string bytes = lr.blob("tactic_data.bytes");
    if (lr.ok() && !p.tactic_data.emplace(std::move(key), std::move(bytes)).second)
      lr.fail("tactic_data.key", "duplicate key");
  }
  decode_packed(lr, p.graph, weights, &p);
  decode_shape_tactics(lr, p.graph, p.profiles, &p);
  if (lr.ok()) {
    std::sort(elided.begin(), elided.end());
    if (elided != p.elided_constants)
      lr.fail("elided_constants", "the list names " + std::to_string(p.elided_constants.size()) +
                                      " constants, the graph stores " + std::to_string(elided.size()) + " only packed");
  }
  // Elided constants are fp32/fp16/bf16 tensors whose packed copies are at least half their size
  // (fp16 of fp32): a larger claim is a corrupt plan, refused before anything reads it.
  uint64_t packed_total = 0;
  for (const auto& [key, b] : p.packed_weights) packed_total += b.bytes;
  if (lr.ok() && elided_bytes > 4 * packed_total + (uint64_t{1} << 20))
    lr.fail("elided_constants", std::to_string(elided_bytes) + " bytes stored only packed, but the packed weights hold " +
                                    std::to_string(packed_total));
  KILN_RETURN_IF_ERROR(lr.status());
  KILN_RETURN_IF_ERROR(check_consumed(lr));

  const SectionEntry& bs = find_section(sections, SectionTag::kBuild);
  ByteReader br(data + bs.offset, bs.length, "build");
  const uint32_t flags = br.u32("build.flags");
  const int32_t opt_level = br.i32("build.opt_level");
  const uint64_t workspace = br.u64("build.workspace_limit");
  const int32_t aux = br.i32("build.max_aux_streams");
  if (br.ok() && (flags & ~kKnownBuildFlags)) br.fail("build.flags", "unknown flag bits " + std::to_string(flags));
  if (br.ok() && (opt_level < 0 || opt_level > 3)) br.fail("build.opt_level", std::to_string(opt_level) + ", expected 0..3");
  if (br.ok() && (aux < -1 || aux > kMaxAuxStreamsInPlan))
    br.fail("build.max_aux_streams", std::to_string(aux) + ", expected -1.." + std::to_string(kMaxAuxStreamsInPlan));
  KILN_RETURN_IF_ERROR(br.status());
  KILN_RETURN_IF_ERROR(check_consumed(br));
  p.build = settings_from_flags(flags);
  p.build.max_aux_streams = aux;
  p.build.opt_level = opt_level;
  p.build.workspace_limit = workspace;
  return p;
}

}  // namespace kiln::plan
