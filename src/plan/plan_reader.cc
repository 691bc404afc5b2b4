// Parses and validates a plan (see plan_format.h): header and checksum first, then each
// section with a bounds-checked reader; every section must be consumed exactly.
#include <cstdint>
#include <cstdlib>
#include <cstring>

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
  auto graph = decode_graph(gr, weights, 0);
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
