// The in-memory form of a plan and its (de)serialization; the byte layout is documented in
// include/kiln/plan.h. The writer trusts its input (it comes from the Builder); the reader
// trusts nothing: every count, id, offset, name and enum is checked before use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/plan.h"
#include "kiln/status.h"

namespace kiln::plan {

// Byte offsets of the fixed header fields (kiln/plan.h).
constexpr size_t kMagicBytes = 8;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffHeaderSize = 12;
constexpr size_t kOffKilnVersion = 16;
constexpr size_t kKilnVersionBytes = 32;
constexpr size_t kOffTarget = 48;
constexpr size_t kOffSectionCount = 68;
constexpr size_t kOffPayloadLength = 72;
constexpr size_t kOffChecksum = 80;
constexpr size_t kOffSectionTable = 88;
constexpr size_t kSectionEntryBytes = 24;
constexpr size_t kAlign = 64;  // sections and weights start at multiples of this
constexpr uint32_t kMaxSections = 16;
constexpr int kMaxSubgraphDepth = 32;
constexpr uint32_t kMaxRank = 64;
inline constexpr const char* kMagic = kPlanMagic;  // kMagicBytes bytes, no NUL (kiln/plan.h)
static_assert(sizeof(kPlanMagic) - 1 == kMagicBytes);

// Section tags: four ASCII bytes read as a little-endian u32.
enum class SectionTag : uint32_t {
  kGraph = 0x48505247,     // "GRPH"
  kProfiles = 0x464F5250,  // "PROF"
  kLayers = 0x5259414C,    // "LAYR"
  kBuild = 0x444C4942,     // "BILD"
  kWeights = 0x54484757,   // "WGHT"
};
const char* section_name(SectionTag tag);  // "graph", ...; nullptr for an unknown tag

// Build settings recorded in the plan (section "build").
struct BuildSettings {
  // The build's precision flags (the "build" section's flag bits). Its layer_precisions are not
  // recorded: their effect is each layer's decided precision (node attribute "precision").
  PrecisionConfig precision;
  int opt_level = 2;
  uint64_t workspace_limit = 0;  // bytes; 0 = no limit
  int32_t max_aux_streams = -1;  // CUDA aux streams for independent branches; -1 = the builder decides
};
constexpr int32_t kMaxAuxStreamsInPlan = 16;  // max_aux_streams is -1..16

// The "build" section's precision flags as a bit set.
uint32_t build_flags(const BuildSettings& b);
BuildSettings settings_from_flags(uint32_t flags);
constexpr uint32_t kKnownBuildFlags = 31;

struct SectionEntry {
  SectionTag tag;
  uint64_t offset = 0;  // from the start of the file
  uint64_t length = 0;  // bytes
};

// Validates the fixed header, the section table, the file length and the checksum; fills
// `header` and `sections` (one entry per known tag, each present exactly once).
Status parse_header(const uint8_t* data, size_t size, PlanHeader* header, std::vector<SectionEntry>* sections);

// The tactic a plan records for one layer (graph node).
constexpr uint32_t kPlanNoTacticId = 0xFFFFFFFFu;  // backends/kernel.h kNoTactic
struct PlanTactic {
  std::string name;                  // "cpu.ref", "cudnn.conv_bias_act algo=1 fp16 nhwc +relu", "cuda.view"
  uint32_t id = kPlanNoTacticId;     // the TacticId the load selects (backends/kernel.h); none for CPU/views
  double tuned_ms = 0;               // its time measured at build, ms (0: not timed)
};

struct Plan {
  PlanHeader header;  // format_version, kiln_version and target are written; sizes are outputs
  ir::Graph graph;
  std::vector<OptimizationProfile> profiles;  // each names every graph input
  std::vector<PlanTactic> tactics;            // one per node of `graph`, in node order
  // Opaque per-tactic state by key (e.g. a serialized cuDNN execution plan), stored after the
  // tactics in the "layers" section: u32 count, then per entry str key, u64 length, bytes.
  std::map<std::string, std::string> tactic_data;
  // Weights packed for their tactics (layout and precision as the device reads them; see
  // backends/cuda/gpu_model.h PackedWeights, docs/decisions/0040), by key "<layer>|...". The
  // bytes live in the weights section; the "layers" section lists them after the tactic data:
  // u32 count, then per entry str key, u64 offset (64-byte aligned), u64 bytes; then u32 count
  // and the i32 value ids of `elided_constants`.
  struct PackedBlob {
    std::shared_ptr<const void> owner;  // keeps `data` alive
    const uint8_t* data = nullptr;
    uint64_t bytes = 0;
  };
  std::map<std::string, PackedBlob> packed_weights;
  // The layer a packed-weight key names (its text before the first '|'; "" when it has none).
  static std::string packed_key_layer(const std::string& key) {
    const size_t bar = key.find('|');
    return bar == std::string::npos ? std::string() : key.substr(0, bar);
  }
  // Top-level constants stored only packed (sorted value ids): their graph tensors keep dtype and
  // shape but no bytes (graph_codec.h kElidedOffset). Each must be read only by layers whose
  // packed weights the plan holds; the reader checks the list against the graph.
  std::vector<ir::ValueId> elided_constants;
  // Tactics tuned at more input shapes than profile 0's opt (issue 10 item 4): a context whose
  // shapes differ from opt takes the nearest set's tactics. Each set names every engine layer
  // (reformats included) as the lowering at those shapes names it. In the "layers" section after
  // the elided constants: u32 count; per set u32 inputs, per input u32 rank + i64 dims, then
  // u32 entries, per entry str layer, u32 tactic id, f64 tuned ms.
  struct ShapeTactics {
    std::vector<Shape> shapes;  // one per graph input, inside profile 0
    std::vector<std::pair<std::string, PlanTactic>> layers;  // PlanTactic::name unused (empty)
  };
  std::vector<ShapeTactics> shape_tactics;
  BuildSettings build;
  uint64_t weights_bytes = 0;                 // filled by read_plan
};

// Serializes `p` (header.kiln_version and header.target are written as given).
std::vector<uint8_t> write_plan(const Plan& p);
// Parses and validates a plan. Weights are copied once into a 64-byte aligned buffer that the
// returned graph's constants share — unless `owner` keeps `data` alive and `data` is 64-byte
// aligned: then the constants point into `data` (no copy; Runtime::load_engine reads the file
// into such a buffer).
StatusOr<Plan> read_plan(const uint8_t* data, size_t size, std::shared_ptr<void> owner = nullptr);

}  // namespace kiln::plan
