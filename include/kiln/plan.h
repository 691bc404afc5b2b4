// The plan: Kiln's versioned, self-describing file for one built model on one target.
// Layout (all integers little-endian; byte offsets from the start of the file):
//    0  char[8]  magic "KILNPLAN"
//    8  u32      format version (kPlanFormatVersion)
//   12  u32      header size: bytes before the first section (64-byte multiple)
//   16  char[32] kiln version, NUL-padded ("0.1.0")
//   48  u8       target backend (0 = cpu, 1 = cuda); u8[3] zero
//   52  u32      CUDA compute capability major, minor; cuDNN version; cuBLASLt version (0 on CPU)
//   68  u32      section count
//   72  u64      payload length: file size - header size
//   80  u64      checksum: plan_checksum() of every byte of the file except these 8
//   88  section table, one 24-byte entry per section: u32 tag, u32 zero, u64 offset, u64 length
// Sections ("graph", "profiles", "layers", "build", "weights") start at 64-byte aligned
// offsets; the weights section holds every constant tensor at a 64-byte aligned offset.
// FNV-1a: Fowler, Noll, Vo, "The FNV Non-Cryptographic Hash Algorithm" (IETF
// draft-eastlake-fnv), 64-bit offset basis 0xcbf29ce484222325, prime 0x100000001b3.
// Format version 2 replaced the byte-wise FNV-1a checksum of version 1 with its word-wise,
// four-lane form (plan_checksum below): the same detection of damaged bytes at memory speed
// (a ResNet-101 plan is 178 MB; byte-wise FNV-1a cost ~0.3 s of every plan load).
// docs/decisions/0001-plan-format.md says why this layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/quant_params.h"
#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

// 2: the build section records max_aux_streams (docs/decisions/0011-aux-streams.md).
// 3: word-wise checksum (plan_checksum) and the tactic data after the layers' tactics.
// 4: each layer's tactic is its name, its integer tactic id (the one the load selects) and its
//    tuned time in ms (docs/decisions/0014-tactic-contract.md), instead of free text.
// 5: weights packed for their tactics (layout and precision as the device reads them) in the
//    weights section, listed after the tactic data; constants stored only packed (offset
//    ~0) (docs/decisions/0040-packed-weights.md).
// 6: a value may carry quantization parameters (value flag 16, QuantParams after its constant),
//    and every layer of a plan records its decided precision (node attribute "precision",
//    docs/decisions/0033-precision-as-data.md).
// 7: Gemm and MatMulBias may carry the epilogue attribute activation ("Relu",
//    docs/decisions/0058-gemm-epilogue-activation.md); a reader of 6 would ignore it and skip the Relu.
// 8: MatMulBias may carry a residual input 3 (passes::fuse_gemm_residual, ops.def); a reader of 7
//    would refuse the layer's arity, so plans that may carry it say so.
// 9: constant-weight GEMMs in 16-bit storage keep their packed weight as [N, K] (transposed at
//    build from a [K, N] MatMul constant; docs/decisions/0089): a reader of 8 would take a square
//    one as [K, N], and find no packed weight for the others.
constexpr uint32_t kPlanFormatVersion = 9;
// The 8 bytes every plan file starts with (the literal's NUL is not part of the file): lets a
// tool tell a plan from another file (the ONNX importer names a plan passed as a model).
inline constexpr char kPlanMagic[] = "KILNPLAN";

enum class PlanBackend : uint8_t { kCpu = 0, kCuda = 1 };

// What a plan was built for; a plan runs only where its target matches.
struct PlanTarget {
  PlanBackend backend = PlanBackend::kCpu;
  uint32_t cc_major = 0, cc_minor = 0;  // CUDA compute capability (0 on CPU)
  uint32_t cudnn_version = 0;           // cudnnGetVersion() at build (0 on CPU)
  uint32_t cublaslt_version = 0;        // cublasLtGetVersion() at build (0 on CPU)
  std::string to_string() const;        // "cpu", "cuda sm_89 (cuDNN 90100, cuBLASLt 120400)"
};

struct PlanHeader {
  uint32_t format_version = kPlanFormatVersion;
  std::string kiln_version;   // the Kiln that wrote the plan
  PlanTarget target;
  uint64_t file_bytes = 0;
  uint64_t checksum = 0;
};

// A tensor as the plan describes it: dims < 0 are dynamic, with their symbol when the model
// named one ("batch").
struct TensorDesc {
  std::string name;
  DataType dtype = DataType::kUndefined;
  bool rank_known = true;
  std::vector<int64_t> dims;         // -1: dynamic
  std::vector<std::string> symbols;  // per dim; "" when static or unnamed
  std::optional<QuantParams> quant;  // set when the tensor holds quantized elements (dtype = quant->type)
  std::string shape_string() const;  // "[batch,3,224,224]", "?" when the rank is unknown
};

// Why a layer with Q/DQ at its inputs runs in float instead of 8 bits: the fusion rule that
// blocked it, as the optimizer recorded it in the plan (docs/decisions/0062).
struct UnfusedQdq {
  std::string rule;    // "K or N not a multiple of 16", "non-zero weight zero point", ...
  std::string detail;  // the values that broke the rule ("K = 40, N = 16"); may be ""
  std::string nodes;   // the ONNX Q/DQ nodes left unfused ("x_q -> x_dq, w_dq")
  std::string type;    // their 8-bit format: "int8", "fp8e4m3", "fp8e5m2" ("" unknown)
};

// One engine layer, for `kiln inspect` and profiling.
struct LayerInfo {
  std::string name;
  std::string op;                    // "Conv" or an internal fused op name
  std::vector<std::string> origin;   // ONNX nodes this layer absorbed (itself first)
  std::vector<TensorDesc> inputs;    // omitted optional inputs have an empty name
  std::vector<TensorDesc> outputs;
  std::string tactic;                // "cpu.ref", "cudnn.conv_bias_act algo=1 fp16 nhwc +relu", ...
  uint32_t tactic_id = 0xFFFFFFFFu;  // the tactic's stable id (source << 24 | variant); all ones: none (CPU, views)
  double tuned_ms = 0;               // the tactic's time measured at build, ms (0: not timed)
  // The layer's decided precision (passes/assign_precisions.cc: "fp32", "fp16", "bf16"): the
  // storage of its float outputs and weights on CUDA; the CPU computes in float32 whatever it
  // says. "" in plans whose graph has no decision.
  std::string precision;
  bool precision_constrained = false;  // decided by a --layer-precisions rule (BuilderConfig::layer_precisions)
  uint64_t packed_weight_bytes = 0;  // CUDA: bytes of this layer's weights stored packed for its tactic
  // An 8-bit layer's quantization (QuantLinear / QuantConv, docs/decisions/0055, 0078), in quant_params_summary's
  // form: "x int8 per_tensor scale=0.0123 zp=0; w int8 per_axis axis=0 scale[48] 0.0011..0.0042".
  // "" for float layers.
  std::string quantization;
  std::optional<UnfusedQdq> unfused_qdq;  // set when Q/DQ at this layer's inputs did not fuse
};

// Reads and validates the header alone (magic, version, sizes, checksum, target fields);
// the Runtime validates the rest. Never crashes on arbitrary bytes.
StatusOr<PlanHeader> read_plan_header(const uint8_t* data, size_t size);

// FNV-1a 64 of `size` bytes, continuing from `hash` (start with the offset basis).
constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
uint64_t fnv1a64(const uint8_t* data, size_t size, uint64_t hash = kFnv1a64Basis);

// FNV-1a over little-endian 64-bit words in four interleaved lanes (lane i takes words i, i+4,
// ...; each lane starts from `seed` xor i), the < 32-byte tail byte-wise into lane 0, the lanes
// and the byte count folded together with FNV-1a. Each step (h ^ w) * prime is a bijection of
// the lane state, so any change confined to one word always changes the result. Used for the
// plan checksum and to recognise equal weights; not a cryptographic hash.
uint64_t hash64_words(const uint8_t* data, size_t size, uint64_t seed = kFnv1a64Basis);
// The plan checksum: every byte of `size` bytes except the 8 at offset 80.
uint64_t plan_checksum(const uint8_t* data, size_t size);

}  // namespace kiln
