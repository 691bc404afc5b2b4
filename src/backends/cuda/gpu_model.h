// The CUDA execution path: an optimized ir::Graph with concrete shapes becomes a GpuModel
// (immutable: layers with their chosen tactics, weights on the device, the activation memory
// plan) and runs in GpuContexts (one activation arena + library handles each, on the caller's
// stream and, for independent branches, the context's aux streams joined back into it
// (streams.h); optionally replayed as a CUDA graph).
// Storage: fp32, or fp16 / bf16 for activations and weights (always float accumulation).
// Layouts: in fp16/bf16 mode 4-D activations are NHWC (tensor cores), everything else
// row-major; explicit reformat layers appear in the layer list where layouts change.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "backends/cuda/kernels.h"
#include "backends/kernel.h"
#include "kiln/logger.h"
#include "kiln/precision.h"
#include "kiln/status.h"

namespace kiln::cuda {

class GpuModel;

// The device state execution contexts run on (docs/decisions/0079): the activation arena, the
// tactic workspace, the cuDNN / cuBLASLt handles, and the aux streams with theirs. The contexts
// of one engine's models at several input shapes share one (GpuModel::create_context's
// `shared`), so switching shapes creates no handle and allocates nothing unless the new model
// needs more bytes than every model before: each buffer only grows (to the largest model's
// need), and a growth bumps generation(), which tells a context its captured CUDA graph names
// freed memory. Not thread-safe: the contexts sharing one must run one at a time (one
// ExecutionContext's shape views, used by one thread).
class GpuResources {
 public:
  // cuDNN and cuBLASLt handles on the current device; no memory yet. Errors: the library call.
  static StatusOr<std::shared_ptr<GpuResources>> create();
  ~GpuResources();
  GpuResources(const GpuResources&) = delete;
  GpuResources& operator=(const GpuResources&) = delete;
  // Grows the arena, workspace and aux streams (count, workspaces, events) to what `m` needs.
  // Before freeing a buffer it replaces, the device is synchronized (work enqueued earlier may
  // still read it). Errors: kOutOfMemory naming the buffer, or the CUDA call that failed.
  Status reserve_for(const GpuModel& m);
  // Grows the arena and the caller's-stream workspace only (bytes); the same rules.
  Status reserve(size_t arena_bytes, size_t workspace_bytes);
  // Frees the arena and workspaces (the handles and streams stay): the engine's set-up
  // resources between two model set-ups. Synchronizes the device first.
  void release_memory();
  uint64_t generation() const;  // bumped by every growth or release
  size_t arena_bytes() const;   // current capacity, bytes
  size_t workspace_bytes() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  GpuResources() = default;
  std::unique_ptr<Impl> impl_;
};

// Device copies of weights shared by the GpuModels of one engine (one model per input-shape
// set): bytes uploaded once are reused by every later model that uploads the same bytes.
// Keyed by size and hash64_words of the bytes. Thread-safe; frees its copies when destroyed.
class WeightCache {
 public:
  WeightCache() = default;
  WeightCache(const WeightCache&) = delete;
  WeightCache& operator=(const WeightCache&) = delete;
  ~WeightCache();
  // The device copy of `bytes` bytes at `host` (uploaded now if these bytes are new).
  StatusOr<void*> get(const void* host, size_t bytes);
  // The device copy of the plan's packed weight `key` (PackedWeights; uploaded on first use).
  // Keyed by name, not content: the bytes are not hashed again at every load.
  StatusOr<void*> get_packed(const std::string& key, const void* host, size_t bytes);
  // A build's packed weight `key`, already uploaded at `device` (by get): later get_packed(key)
  // calls (the build's other tuned shape sets) take that copy instead of uploading again.
  void remember_packed(const std::string& key, void* device);
  // The device copy of a graph constant's `bytes` bytes at `host`, found by address (the constant
  // must stay unchanged while this cache lives: the engine's graph owns it); the first call per
  // address goes through get (one content hash), later ones cost a map lookup.
  StatusOr<void*> get_constant(const void* host, size_t bytes);
  size_t device_bytes() const;  // bytes held on the device
  int uploads() const;          // distinct weights uploaded

 private:
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, size_t>, void*> copies_;
  std::map<std::string, void*> packed_;
  std::map<std::pair<const void*, size_t>, void*> constants_;  // get_constant, by address
  size_t bytes_ = 0;
  StatusOr<void*> place(const void* host, size_t bytes);  // a new device copy (mu_ held)
  // Weights are carved out of 64 MiB blocks (256-byte aligned; a larger weight gets its own
  // block): one cudaMalloc per block instead of one per weight, which dominated small uploads.
  std::vector<void*> blocks_;
  char* cursor_ = nullptr;
  size_t left_ = 0;
};

// cudaMalloc of `bytes`; on failure an error naming `what`, the bytes and the device's free /
// total memory (kOutOfMemory when the device is out of memory).
Status device_alloc(void** p, size_t bytes, const std::string& what);

// Weights as the lowering uploads them: in the layout and storage type of their layer's
// tactic (a conv's KRSC fp16 filter, a GEMM's alpha-scaled [K, N] bf16 weight, a pointwise
// constant in NHWC order, ...). The build records them (GpuModel::packed_weights) and the plan
// stores them (issue 10 item 3, docs/decisions/0040), so a load uploads bytes as they are,
// without layout changes or conversion. Key: "<layer>|<weight>|<storage>|<layout>|<shape>"
// (packed_weight_key), so another input shape of the same engine finds the same bytes.
struct PackedWeight {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};
struct PackedWeights {
  std::shared_ptr<const void> owner;            // keeps `data` of every entry alive
  std::map<std::string, PackedWeight> by_key;
  // Constants the plan holds only packed (their graph tensors read as zeros): a layer that
  // needs one of them under a key the plan lacks is an error, never a silent zero weight.
  std::vector<int> elided;                      // ir::ValueId, sorted
  bool is_elided(int value) const;
};
std::string packed_weight_key(const std::string& layer, const std::string& weight, StorageType st, bool nhwc,
                              const Shape& logical);

struct GpuBuildOptions {
  // The plan's precision (kiln/precision.h): precision.fp16 / bf16 — FP16 / BF16 activations and
  // weights (FP32 accumulation; fp16 wins if both) for graph inputs and for layers without a decided
  // precision (each layer's own is its "precision" attribute, passes::assign_precisions);
  // precision.tf32 — TF32 tensor cores for FP32 convolutions/GEMMs.
  PrecisionConfig precision;
  size_t workspace_limit = 1ull << 30;  // bytes of tactic scratch memory one layer may use
  bool tune = true;                   // select tactics through select_tactic (else: the first that runs)
  // fp16/bf16: a graph input whose only consumers are convolutions with C % 8 != 0 input
  // channels is reformatted to NHWC with C zero-padded to a multiple of 8 (the conv weights
  // too), so cuDNN can use tensor-core kernels (ResNet's first conv, C = 3). Off by default:
  // on the H200 it made ResNet-101 FP16 slower (batch 64 20.0k vs 22.0k img/s, batch 256 25.0k
  // vs 28.2k; bench/results/2026-11-22-h200-run8) because the padded input reformat costs more
  // than the conv saves; still slower with the pixel-per-thread reformat (run 17 of 2026-11-23:
  // batch 64 20.7k vs 22.5k, batch 256 25.3k vs 28.0k).
  bool pad_input_channels = false;
  // Aux streams independent branches may run on (streams.h, docs/decisions/0011-aux-streams.md):
  // 0 = every layer on the caller's stream; < 0 = the builder decides (the graph's forks, at most
  // kAutoAuxStreams); at most kMaxAuxStreams. Tuning always runs on one stream.
  int max_aux_streams = -1;
  // Tactic sources the lowering may offer (a conv's cuDNN-graph and cuBLASLt implementations
  // are not created when their source is off); the selector filters candidates the same way.
  TacticSources sources = TacticSources::all();
  // Tactics chosen at build time, by layer name (from a plan): selected instead of tuning.
  struct PresetTactic {
    TacticId id = kNoTactic;
    double tuned_ms = 0;  // the time the build measured, ms (for reports)
  };
  std::map<std::string, PresetTactic> preset_tactics;
  // Tuning: time each candidate with the L2 cache flushed before every run (TuningBudget::cold_l2).
  bool cold_l2_timing = true;
  // Presets chosen at other shapes (the nearest tuned shape set): each is checked to run here
  // and a layer whose preset does not takes its first candidate that runs.
  bool verify_presets = false;
  // The builder's tactic selection (builder/tactic_selector.h), used when `tune` and a layer has
  // no preset; when empty (or not `tune`), each layer runs the first of its candidates that runs.
  TacticSelectFn select_tactic;
  // With preset_tactics: the plan's tactic data (Layer::export_tactic_data; not owned; may be null).
  const std::map<std::string, std::string>* tactic_data = nullptr;
  // Verbose messages (lowering steps and time per op kind); none when empty.
  Logger logger;
  // Called before each layer is tuned (done = layers finished, total, layer name) and once at
  // the end (done == total, empty name).
  std::function<void(int done, int total, const std::string& layer)> on_tune_progress;

  StorageType storage() const {
    return precision.fp16 ? StorageType::kF16 : (precision.bf16 ? StorageType::kBF16 : StorageType::kF32);
  }
  // When set, weights come from (and go to) this cache instead of allocations of the model.
  std::shared_ptr<WeightCache> weight_cache;
  // Load: the plan's packed weights (not owned; may be null). Build: record_packed keeps a host
  // copy of every weight as uploaded (GpuModel::packed_weights) for the plan.
  const PackedWeights* packed = nullptr;
  bool record_packed = false;
  // Handles (and scratch memory) the tactic set-up of GpuModel::create runs on: an engine passes
  // one for all the models it lowers at new input shapes, so that set-up creates no handle; the
  // arena and workspace are reserved only when a layer must run (tuning, checking a preset at
  // shapes it was not tuned for, or a layer without a preset) and released again at the end.
  // Null: create makes its own for the duration of the call.
  std::shared_ptr<GpuResources> setup_resources;
};

// Concrete dtype and shape of every value of a graph (indexed by ValueId), e.g. from one CPU
// reference run at the profile's opt shapes.
struct ValueShapes {
  std::vector<Shape> shapes;
  std::vector<DataType> dtypes;
  // Some shape may depend on the input *values*, not only their shapes (docs/decisions/0069):
  // two reference runs with different made-up values disagreed, or the shapes came from the
  // caller's own values. `dependence` says what was seen.
  bool value_dependent = false;
  std::string dependence;
  // The declared dtype of each value widen_narrow_integers computes wide (uint8 / int8 / uint16 /
  // int16 / uint32; kUndefined for the others, empty when none): the narrow kernels of
  // docs/decisions/0076 compute that type's result.
  std::vector<DataType> narrow;
};
// The declared narrow dtype of `v` (ValueShapes::narrow), or kUndefined.
DataType declared_narrow_dtype(const ValueShapes& vs, ir::ValueId v);
// Unsupported, naming the value, when a graph input or output is a sequence or an optional
// (CUDA engines take and return tensors only).
Status check_tensor_io(const ir::Graph& g);
// Every value's shape and dtype at `input_shapes` (one per graph input): from static shape
// inference when it determines them all, else from CPU reference runs — two on seeded made-up
// inputs (the second, with other values, sets value_dependent when any shape differs; when it
// fails, once more with integer inputs 0 / 1, and when that fails too nothing is marked),
// or one on `values` when given (a call's own inputs, which must have `input_shapes`). A graph
// holding NonMaxSuppression, Unique or a Compress with a run-time condition skips the static answer (a
// shape the model declares for their outputs is only an example) and is always marked
// value-dependent (docs/decisions/0074).
// Unsupported when a graph input or output is not a tensor (check_tensor_io), or, naming the
// node, when the graph holds an op that writes memory named by its inputs —
// ir::op_writes_memory, PagedAttention — which must never run on made-up inputs.
StatusOr<ValueShapes> infer_value_shapes_by_reference(const ir::Graph& g, const std::vector<Shape>& input_shapes);
StatusOr<ValueShapes> infer_value_shapes_by_reference(const ir::Graph& g, const std::vector<Shape>& input_shapes,
                                                      const std::vector<Tensor>* values);

// Shape-tensor inputs (docs/decisions/0073, shape_inputs.cc): a graph input (a tensor, not a
// graph output, of at most kMaxShapeInputElements elements where its shape is declared) whose
// every use is a shape operand — Reshape / Expand's shape, Tile's repeats, Slice's starts / ends /
// axes / steps, (Un)Squeeze / Reduce* axes, Split's split, Pad's pads / axes (and its scalar constant_value), TopK's k, OneHot's
// depth, CumSum's axis, Resize's roi / scales / sizes, Upsample's scales, ConstantOfShape's and
// the window functions' input, MelWeightMatrix's scalars, MaxUnpool's output_shape. Its value decides the lowering (output
// shapes, and axes or offsets even where the shape stays), so engines of such graphs are
// value-keyed and lower at each call's values with the input bound as a constant.
constexpr int64_t kMaxShapeInputElements = 64;
struct ShapeInput {
  size_t input = 0;        // index into Graph::inputs
  std::string first_use;   // "node 'r' (Reshape) input 1": for messages
};
std::vector<ShapeInput> shape_operand_inputs(const ir::Graph& g);
// "graph input 's' is read as a shape operand (node 'r' (Reshape) input 1); ...": the
// dependence an engine reports (enqueue refused, load warning).
std::string shape_input_dependence(const ir::Graph& g, const std::vector<ShapeInput>& inputs);
// A copy of `g` where the uses of each shape_operand_inputs input read a new constant value
// ("<name>:bound") holding its value in `values` (one tensor per graph input, in order; inputs
// above kMaxShapeInputElements are left as they are); nodes computed from bound values and
// constants only (a window function of its size, a ConstantOfShape) are folded to constants. The inputs stay graph inputs (staged, read
// by no layer), value ids of `g` are unchanged. InvalidArgument when `values` does not match the
// inputs (count, or a bound input's declared dtype).
StatusOr<ir::Graph> bind_shape_inputs(const ir::Graph& g, const std::vector<Tensor>& values);

// Lists every layer the CUDA path cannot run (op, dtype or attribute), all at once. Lowers
// with the rules of `storage` (kF32 row-major; kF16 / kBF16: NHWC) and uploads nothing, so it
// also answers on a machine without a GPU. Integer storage types are invalid here.
Status check_gpu_support(const ir::Graph& g, const ValueShapes& shapes, StorageType storage);
// The same with the FP32 (or, when `fp16`, FP16) rules.
Status check_gpu_support(const ir::Graph& g, const ValueShapes& shapes, bool fp16 = false);

// The stream plan and arena a build with `opts` would make (opts.precision / max_aux_streams), from
// a lowering that touches no device (as check_gpu_support): for tests and tools on machines
// without a GPU. Tactics are not chosen, so workspaces are not known. Errors as GpuModel::create.
struct GpuStreamSummary {
  std::vector<std::string> layers;  // engine layer names, in enqueue order
  std::vector<int> streams;         // per layer: 0 = the caller's stream, 1.. = an aux stream
  int aux_streams = 0;
  size_t arena_bytes = 0;           // activation arena per context
  // Host dtypes the engine takes each graph input in and returns each graph output in (graph order).
  std::vector<DataType> input_dtypes, output_dtypes;
};
StatusOr<GpuStreamSummary> plan_gpu_streams(const ir::Graph& g, const ValueShapes& shapes, const GpuBuildOptions& opts);

struct GpuLayerInfo {
  std::string name;    // engine layer name
  std::string op;      // "FusedConv", "Reformat", ...
  std::string tactic;  // "cudnn.conv_bias_act algo=1 fp16 nhwc +relu", "cublaslt.matmul heuristic#3 ...", ...
  TacticId tactic_id = kNoTactic;  // the selected tactic's stable id
  std::vector<std::string> origin;
  double tuned_ms = 0;  // measured time of the chosen tactic during tuning (0 if not timed), ms
  std::string fallback;  // why a slower path than the fast tactic runs ("" = none)
  size_t workspace_bytes = 0;  // scratch bytes the chosen tactic uses
  int stream = 0;              // 0 = the caller's stream, 1.. = an aux stream of the context
  bool restored = false;       // the tactic came from the plan's tactic data (no re-creation)
};

class GpuContext;

class GpuModel {
 public:
  ~GpuModel();
  // Builds layers, uploads weights, picks tactics (timed on the device when opts.tune).
  static StatusOr<std::shared_ptr<GpuModel>> create(const ir::Graph& g, const ValueShapes& shapes,
                                                    const GpuBuildOptions& opts);
  // A context on new device state, or on `shared` (grown to this model's need, see GpuResources):
  // the contexts of one engine's models at several shapes share it, one running at a time.
  StatusOr<std::unique_ptr<GpuContext>> create_context(std::shared_ptr<GpuResources> shared = nullptr) const;

  const std::vector<GpuLayerInfo>& layers() const;
  // Graph layers that run as no layer at all: Concats whose inputs are all written in place.
  const std::vector<std::string>& eliminated_layers() const;
  // Logical shapes of the graph inputs / outputs (row-major), in graph order.
  std::vector<Shape> input_shapes() const;
  std::vector<Shape> output_shapes() const;
  // Host dtype each graph input is given in: its declared dtype (float32, float16, bfloat16,
  // int32, int64, bool; staged as given, converted to the internal storage by a reformat layer).
  // Outputs are returned in their declared dtype likewise.
  std::vector<DataType> input_dtypes() const;
  size_t arena_bytes() const;            // activation arena per context
  size_t activation_bytes_sum() const;   // sum of all activations (what no reuse would need)
  size_t weight_bytes() const;
  size_t workspace_bytes() const;  // tactic scratch per context: the caller's stream's plus each aux stream's
  int aux_streams() const;         // aux streams each context runs branches on (0: none)
  // What the chosen tactics can serialize for a fast load (Layer::export_tactic_data), by key.
  std::map<std::string, std::string> tactic_data() const;
  // With GpuBuildOptions::record_packed: every weight as uploaded, by packed_weight_key.
  const std::map<std::string, std::vector<uint8_t>>& packed_weights() const;
  // The same, moved out (the build's plan takes them; packed_weights() is then empty).
  std::map<std::string, std::vector<uint8_t>> take_packed_weights();
  // Constants of the graph whose every reading layer uploaded them as a recorded packed weight
  // (float, at least kMinElidedElements elements, not a graph output): the plan may store them
  // only packed. Empty without record_packed.
  std::vector<int> elidable_constants(const ir::Graph& g) const;
  static constexpr int64_t kMinElidedElements = 1024;
  // Weights this model took from the plan's packed bytes (GpuBuildOptions::packed).
  int packed_hits() const;
  // Where create() spent its time (ms) and how the plan's tactics were set up.
  struct SetupTimes {
    double lower_ms = 0;    // lowering, weight conversion and upload, memory plan
    double weights_ms = 0;  // of lower_ms: weight layout change, conversion and upload
    double tactics_ms = 0;  // tuning, or restoring the plan's tactics
    int restored = 0;       // layers whose tactic came from the plan's tactic data
  };
  const SetupTimes& setup_times() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// enqueue, enqueue_device and replay run the layers on the given stream and the context's aux
// streams (GpuModel::aux_streams): the aux streams first wait on an event recorded on the given
// stream, and before the call returns the given stream waits on every aux stream, so work
// enqueued on it later sees every output, and a capture of the call is a fork/join graph.
class GpuContext {
 public:
  ~GpuContext();
  // Host inputs (GpuModel::input_dtypes, logical NCHW, one per graph input, exact build shapes) ->
  // host outputs (each in the graph output's declared dtype). Synchronous convenience
  // wrapper over enqueue.
  Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs);
  // Copies inputs in, runs every layer, copies outputs out, all on `stream` (no allocation,
  // no synchronization). Host buffers must stay valid until the stream reaches this point.
  Status enqueue(const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs, cudaStream_t stream);
  // The same with caller-owned buffers: `inputs[i]` / `outputs[i]` are device (or pinned host)
  // addresses of row-major tensors of input_shapes()[i] in input_dtypes()[i] / of
  // output_shapes()[i] in the graph output's declared dtype (raw addresses: the
  // dtype cannot be checked here). Enqueues
  // the copies into / out of the arena and every layer on `stream`; never allocates, never
  // synchronizes and never launches the context's own CUDA graph, so it may itself be captured
  // into a CUDA graph (any capture mode).
  Status enqueue_device(const std::vector<const void*>& inputs, const std::vector<void*>& outputs, cudaStream_t stream);
  // Runs the layers only (inputs already on the device from an earlier enqueue; no copies):
  // the GPU compute time benchmarks compare against peers that keep data on the device.
  Status replay(cudaStream_t stream);
  // Captures the layer sequence into a CUDA graph on first use and replays it afterwards.
  void use_cuda_graph(bool on);
  // Per-layer device times (ms) of one run, in layer order (synchronizes; for --dump-profile and
  // bench-llm --profile-decode). Layers run one after another on `stream` (no aux streams) so each
  // time is the layer's own, between an event pair. `inputs` are copied in first; nullptr runs on
  // what the arena holds — the inputs the last enqueue copied there (the layers must be safe to
  // run twice on them: an LLM step's KV append writes the same slots again). The layers are
  // enqueued behind a spin kernel, in chunks of kProfileChunk, so the GPU runs them back to back
  // as in a CUDA graph and no time is the host's launch latency.
  StatusOr<std::vector<double>> profile_layers(const std::vector<Tensor>* inputs, cudaStream_t stream);
  static constexpr size_t kProfileChunk = 96;

  struct Impl;

 private:
  friend class GpuModel;
  // Forgets the captured CUDA graph when the shared device state moved since its capture.
  void drop_stale_graph();
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cuda
