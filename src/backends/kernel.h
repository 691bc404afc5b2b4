// The tactic contract every device kernel follows (docs/decisions/0014-tactic-contract.md),
// split by phase as TensorRT's IPluginV3 and XNNPACK's create/reshape/setup are:
//   build time: a layer lists its candidate tactics (stable integer TacticIds), the builder's
//               tactic selector (builder/tactic_selector.h — the only place that times
//               tactics and the only user of the timing cache) selects and times each, and the
//               plan records the winner's id;
//   load time:  the layer selects the plan's id again — no timing, no tuning;
//   run time:   enqueue on a stream, which never allocates and never synchronizes.
// The CPU reference backend has one tactic per op ("cpu.ref", backends/cpu/cpu_kernel.h).
// This header has no CUDA dependency: the selector and its tests build everywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln {

enum class BackendKind : uint8_t { kCpu = 0, kCuda = 1 };
const char* backend_name(BackendKind b);

// Where a tactic's kernel comes from. The numbering is part of the plan format (a TacticId
// carries it): append, never renumber.
enum class TacticSource : uint8_t {
  kKiln = 0,        // Kiln's own CUDA kernels
  kCudnn = 1,       // cuDNN's legacy API (cudnnConvolutionBiasActivationForward, pooling)
  kCudnnGraph = 2,  // cuDNN's graph API (operation graphs, engine configurations)
  kCublasLt = 3,    // cuBLASLt matmul
};
constexpr int kNumTacticSources = 4;
const char* tactic_source_name(TacticSource s);  // "kiln", "cudnn", "cudnn_graph", "cublaslt"

// A tactic's stable id: its source in the top 8 bits, a source-defined variant below (a cuDNN
// forward algorithm, a heuristic rank, a kernel flavour). Equal ids mean the same kernel for
// the same layer signature, GPU and library versions, which is what the plan and the timing
// cache record.
using TacticId = uint32_t;
constexpr TacticId make_tactic_id(TacticSource source, uint32_t variant) {
  return (static_cast<uint32_t>(source) << 24) | (variant & 0xFFFFFFu);
}
constexpr TacticSource tactic_id_source(TacticId id) { return static_cast<TacticSource>(id >> 24); }
constexpr uint32_t tactic_id_variant(TacticId id) { return id & 0xFFFFFFu; }
constexpr TacticId kNoTactic = 0xFFFFFFFFu;  // "not chosen yet"; no source has 255

// The set of tactic sources a build may use (TensorRT's IBuilderConfig::setTacticSources,
// trtexec --tacticSources). Layers whose only implementation comes from a disabled source fail
// the build with an error naming the layer and the source.
class TacticSources {
 public:
  static TacticSources all() { return TacticSources((1u << kNumTacticSources) - 1); }
  static TacticSources none() { return TacticSources(0); }
  bool has(TacticSource s) const { return mask_ & (1u << static_cast<unsigned>(s)); }
  void set(TacticSource s, bool on);
  uint32_t mask() const { return mask_; }
  bool operator==(const TacticSources& o) const { return mask_ == o.mask_; }
  // "cudnn,cudnn_graph,cublaslt,kiln" (every enabled source in enum order; "" when none).
  std::string to_string() const;
  // Parses trtexec's form: a comma-separated list of "+source" / "-source" edits applied to all
  // sources ("-cudnn_graph,+cublaslt"), or plain names to enable only those ("kiln,cublaslt").
  // Mixing the two forms, unknown names and empty items are errors naming the item.
  static StatusOr<TacticSources> parse(const std::string& spec);

 private:
  explicit TacticSources(uint32_t m) : mask_(m) {}
  uint32_t mask_;
};

// How much the builder may time (TensorRT's --avgTiming and --maxTactics): part of the timing
// cache key, because a smaller budget may measure a different winner.
struct TuningBudget {
  // Most candidates timed per layer and tactic source; 0 = the defaults: 4 cuDNN graph engine
  // configurations (finalizing one may compile a kernel, ~1 s), every candidate of the others.
  int max_tactics = 0;
  int timing_iterations = 10;  // timed runs per candidate, after one untimed warm-up (>= 1)
  // Each timed run starts with the GPU's L2 cache flushed (a write of twice its size), as a layer
  // meets its weights inside a whole network (each weight read once per inference); timing runs
  // back to back instead keeps weights in L2 and favours tactics that lose in the network
  // (docs/decisions/0014, run 35). Part of the timing-cache key.
  bool cold_l2 = true;
  int limit(TacticSource s) const;  // max_tactics for `s`, the defaults applied
  std::string to_string() const;  // "tactics<=default iters=10 l2=cold", "tactics<=8 iters=10 l2=warm"
};

// The build-time face of one layer, as the tactic selector sees it. A backend wraps each of
// its layers (with the device state it needs) in one of these for the selection.
class TunableLayer {
 public:
  virtual ~TunableLayer() = default;
  virtual const std::string& name() const = 0;
  // Everything the measured time depends on (op, shapes, dtypes/layouts, parameters, epilogue,
  // workspace cap); layer names are not part of it, so equal layers share timing-cache entries.
  virtual std::string signature() const = 0;
  // The candidates in the layer's order of preference (the first is the untuned default), from
  // the enabled sources only. May query libraries (heuristics); an error is a build error.
  virtual StatusOr<std::vector<TacticId>> candidates() = 0;
  // Makes `id` the layer's tactic and checks that it runs here within the workspace cap. An
  // error means "this candidate cannot run" — the selector skips it and reports the reason if
  // no candidate runs.
  virtual Status select(TacticId id) = 0;
  // Mean device time of one run of the selected tactic, ms, over `iterations` timed runs after
  // one warm-up run.
  virtual StatusOr<double> time_ms(int iterations) = 0;
};

// What the selector decided for one layer.
struct TacticChoice {
  TacticId id = kNoTactic;
  double ms = 0;        // measured (or cached) time of one run, ms; 0 when not timed
  bool cached = false;  // taken from the timing cache without timing
};
// The builder's tactic selection as a backend receives it (builder/tactic_selector.h).
using TacticSelectFn = std::function<StatusOr<TacticChoice>(TunableLayer&)>;

}  // namespace kiln
