// Verifier (see verifier.h). The arity table lists, per op, the input and output counts the ONNX
// spec allows (over all opsets Kiln imports) and attributes without a default.
#include "ir/verifier.h"

#include <algorithm>
#include <set>

#include "ir/pointwise_program.h"

namespace kiln::ir {
namespace {

constexpr int kMany = 1 << 20;

struct Arity {
  int min_in, max_in, min_out, max_out;
};

Arity arity(OpKind op) {
  switch (op) {
    case OpKind::kAbs: case OpKind::kAcos: case OpKind::kAcosh: case OpKind::kAsin: case OpKind::kAsinh:
    case OpKind::kAtan: case OpKind::kAtanh: case OpKind::kBitwiseNot: case OpKind::kCeil: case OpKind::kCos:
    case OpKind::kCosh: case OpKind::kElu: case OpKind::kErf: case OpKind::kExp: case OpKind::kFloor:
    case OpKind::kGelu: case OpKind::kHardSigmoid: case OpKind::kHardSwish: case OpKind::kHardmax:
    case OpKind::kIdentity: case OpKind::kIsInf: case OpKind::kIsNaN: case OpKind::kLeakyRelu: case OpKind::kLog:
    case OpKind::kLogSoftmax: case OpKind::kLpNormalization: case OpKind::kLRN:
    case OpKind::kMeanVarianceNormalization: case OpKind::kMish: case OpKind::kNeg: case OpKind::kNot:
    case OpKind::kReciprocal: case OpKind::kRelu: case OpKind::kRound: case OpKind::kSelu: case OpKind::kShrink:
    case OpKind::kSigmoid: case OpKind::kSign: case OpKind::kSin: case OpKind::kSinh: case OpKind::kSoftmax:
    case OpKind::kSoftplus: case OpKind::kSoftsign: case OpKind::kSqrt: case OpKind::kTan: case OpKind::kTanh:
    case OpKind::kThresholdedRelu: case OpKind::kCelu: case OpKind::kCast: case OpKind::kShape: case OpKind::kSize:
    case OpKind::kFlatten: case OpKind::kTranspose: case OpKind::kDepthToSpace: case OpKind::kSpaceToDepth:
    case OpKind::kGlobalAveragePool: case OpKind::kGlobalLpPool: case OpKind::kGlobalMaxPool:
    case OpKind::kAveragePool: case OpKind::kLpPool: case OpKind::kNonZero: case OpKind::kEyeLike:
    case OpKind::kArgMax: case OpKind::kArgMin: case OpKind::kDet: case OpKind::kConstantOfShape:
    case OpKind::kBlackmanWindow: case OpKind::kHammingWindow: case OpKind::kHannWindow:
    case OpKind::kReformat:
      return {1, 1, 1, 1};
    case OpKind::kAdd: case OpKind::kAnd: case OpKind::kBitShift: case OpKind::kBitwiseAnd: case OpKind::kBitwiseOr:
    case OpKind::kBitwiseXor: case OpKind::kDiv: case OpKind::kEqual: case OpKind::kGreater:
    case OpKind::kGreaterOrEqual: case OpKind::kLess: case OpKind::kLessOrEqual: case OpKind::kMod: case OpKind::kMul:
    case OpKind::kOr: case OpKind::kPow: case OpKind::kPRelu: case OpKind::kSub: case OpKind::kXor:
    case OpKind::kMatMul: case OpKind::kCastLike: case OpKind::kExpand: case OpKind::kGather:
    case OpKind::kGatherElements: case OpKind::kGatherND: case OpKind::kCompress: case OpKind::kCumSum:
    case OpKind::kReverseSequence: case OpKind::kGridSample:
      return {2, 2, 1, 1};
    case OpKind::kMax: case OpKind::kMin: case OpKind::kMean: case OpKind::kSum: case OpKind::kConcat:
      return {1, kMany, 1, 1};
    case OpKind::kReduceL1: case OpKind::kReduceL2: case OpKind::kReduceLogSum: case OpKind::kReduceLogSumExp:
    case OpKind::kReduceMax: case OpKind::kReduceMean: case OpKind::kReduceMin: case OpKind::kReduceProd:
    case OpKind::kReduceSum: case OpKind::kReduceSumSquare: case OpKind::kSqueeze: case OpKind::kUnsqueeze:
    case OpKind::kReshape: case OpKind::kUpsample: case OpKind::kTrilu: case OpKind::kClip:
      return {1, 3, 1, 1};
    case OpKind::kWhere: case OpKind::kOneHot: case OpKind::kRange: case OpKind::kScatter:
    case OpKind::kScatterElements: case OpKind::kScatterND: case OpKind::kInstanceNormalization:
    case OpKind::kGroupNormalization: case OpKind::kRoiAlign: case OpKind::kMaxUnpool:
      return {2, 3, 1, 1};
    case OpKind::kConstant: return {0, 0, 1, 1};
    case OpKind::kConv: case OpKind::kConvTranspose: case OpKind::kGemm: return {2, 3, 1, 1};
    case OpKind::kConvInteger: case OpKind::kMatMulInteger: case OpKind::kFusedConv: return {2, 4, 1, 1};
    case OpKind::kFusedPointwise: return {1, kMaxPwInputs, 1, 1};
    case OpKind::kQLinearConv: return {8, 9, 1, 1};
    case OpKind::kQLinearMatMul: return {8, 8, 1, 1};
    case OpKind::kQuantizeLinear: case OpKind::kDequantizeLinear: return {2, 3, 1, 1};
    case OpKind::kDynamicQuantizeLinear: return {1, 1, 3, 3};
    case OpKind::kBatchNormalization: return {5, 5, 1, 5};
    case OpKind::kLayerNormalization: return {2, 3, 1, 3};
    case OpKind::kAttention: return {3, 4, 1, 1};
    case OpKind::kRMSNormalization: return {2, 2, 1, 1};
    case OpKind::kRope: return {3, 4, 1, 1};
    case OpKind::kMatMulBias: return {3, 5, 1, 1};
    case OpKind::kPagedAttention: return {7, 8, 1, 1};
    case OpKind::kQuantLinear: return {3, 4, 1, 1};
    case OpKind::kQuantConv: return {3, 5, 1, 1};
    case OpKind::kDropout: return {1, 3, 1, 2};
    case OpKind::kMaxPool: return {1, 1, 1, 2};
    case OpKind::kMaxRoiPool: return {2, 2, 1, 1};
    case OpKind::kSlice: return {1, 5, 1, 1};
    case OpKind::kPad: return {1, 4, 1, 1};
    case OpKind::kResize: return {1, 4, 1, 1};
    case OpKind::kTile: return {2, 3, 1, 1};
    case OpKind::kSplit: return {1, 2, 1, kMany};
    case OpKind::kTopK: return {1, 2, 2, 2};
    case OpKind::kUnique: return {1, 1, 1, 4};
    case OpKind::kEinsum: return {1, kMany, 1, 1};
    case OpKind::kNegativeLogLikelihoodLoss: return {2, 3, 1, 1};
    case OpKind::kSoftmaxCrossEntropyLoss: return {2, 3, 1, 2};
    case OpKind::kNonMaxSuppression: return {2, 5, 1, 1};
    case OpKind::kRNN: case OpKind::kGRU: return {3, 6, 0, 2};
    case OpKind::kLSTM: return {3, 8, 0, 3};
    case OpKind::kIf: return {1, 1, 1, kMany};
    case OpKind::kLoop: return {2, kMany, 1, kMany};
    case OpKind::kScan: return {1, kMany, 1, kMany};
    case OpKind::kDFT: return {1, 3, 1, 1};
    case OpKind::kSTFT: return {2, 4, 1, 1};
    case OpKind::kMelWeightMatrix: return {5, 5, 1, 1};
    case OpKind::kSequenceEmpty: return {0, 0, 1, 1};
    case OpKind::kSequenceConstruct: return {1, kMany, 1, 1};
    case OpKind::kSequenceAt: case OpKind::kConcatFromSequence: case OpKind::kSequenceLength:
    case OpKind::kOptionalGetElement: case OpKind::kTfIdfVectorizer:
      return {1, 2, 1, 1};
    case OpKind::kSequenceErase: case OpKind::kSplitToSequence: return {1, 2, 1, 1};
    case OpKind::kSequenceInsert: return {2, 3, 1, 1};
    case OpKind::kSequenceMap: return {1, kMany, 1, kMany};
    case OpKind::kOptional: case OpKind::kOptionalHasElement: return {0, 1, 1, 1};
    case OpKind::kCount: break;
  }
  return {0, kMany, 0, kMany};
}

// arity() narrowed to the node's opset where an input was added later (an extra input at an
// older opset would otherwise be ignored by a kernel reading the attribute form). opset <= 0:
// unknown (internal nodes), the union over opsets applies.
Arity arity_at(OpKind op, int opset) {
  Arity a = arity(op);
  if (opset <= 0) return a;
  auto cap = [&](int since, int before_max) {
    if (opset < since) a.max_in = std::min(a.max_in, before_max);
  };
  switch (op) {
    case OpKind::kClip: cap(11, 1); break;                    // min/max inputs since 11
    case OpKind::kPad: cap(11, 1); cap(18, 3); break;         // pads/value since 11, axes since 18
    case OpKind::kSlice: cap(10, 1); break;                   // starts/ends/axes/steps since 10
    case OpKind::kSqueeze: case OpKind::kUnsqueeze: cap(13, 1); break;  // axes input since 13
    case OpKind::kReduceSum: cap(13, 1); break;
    case OpKind::kReduceL1: case OpKind::kReduceL2: case OpKind::kReduceLogSum: case OpKind::kReduceLogSumExp:
    case OpKind::kReduceMax: case OpKind::kReduceMean: case OpKind::kReduceMin: case OpKind::kReduceProd:
    case OpKind::kReduceSumSquare:
      cap(18, 1);
      break;
    case OpKind::kDropout: cap(12, 1); break;                 // ratio/training_mode since 12
    case OpKind::kTopK: cap(10, 1); break;                    // k input since 10
    case OpKind::kUpsample: cap(9, 1); break;                 // scales input since 9
    case OpKind::kResize: cap(11, 2); break;                  // roi/scales/sizes since 11
    default: break;
  }
  return a;
}

// Attributes the spec gives no default, for the opsets where they are attributes.
std::vector<const char*> required_attrs(const Node& n) {
  switch (n.op) {
    case OpKind::kCast: return {"to"};
    case OpKind::kConcat: return n.opset >= 4 ? std::vector<const char*>{"axis"} : std::vector<const char*>{};
    case OpKind::kAveragePool: case OpKind::kMaxPool: case OpKind::kLpPool: case OpKind::kMaxUnpool:
      return {"kernel_shape"};
    case OpKind::kMaxRoiPool: return {"pooled_shape"};
    case OpKind::kDepthToSpace: case OpKind::kSpaceToDepth: return {"blocksize"};
    case OpKind::kEinsum: return {"equation"};
    case OpKind::kIf: return {"then_branch", "else_branch"};
    case OpKind::kLoop: return {"body"};
    case OpKind::kScan: return {"body", "num_scan_inputs"};
    case OpKind::kUnsqueeze: return n.opset < 13 ? std::vector<const char*>{"axes"} : std::vector<const char*>{};
    case OpKind::kGroupNormalization: return {"num_groups"};
    case OpKind::kFusedPointwise: return {"program"};
    case OpKind::kPagedAttention: return {"layer", "block_size", "cache_dtype"};
    default: return {};
  }
}

struct Scope {
  const Graph* g;
  const Scope* parent;
  const std::set<std::string>* visible;  // names defined in `g` before the node being checked
};

class Verifier {
 public:
  Status run(const Graph& g, const Scope* outer) {
    const std::string where = "graph '" + g.name + "'";
    for (size_t i = 0; i < g.values.size(); ++i)
      if (g.values[i].id != static_cast<ValueId>(i)) return invalid_model(where + ": value #" + std::to_string(i) + " has id " + std::to_string(g.values[i].id));
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].id != static_cast<NodeId>(i)) return invalid_model(where + ": node #" + std::to_string(i) + " ('" + g.nodes[i].name + "') has id " + std::to_string(g.nodes[i].id));
    auto valid = [&](ValueId v) { return v >= 0 && v < static_cast<ValueId>(g.values.size()); };
    auto vname = [&](ValueId v) { return "'" + g.value(v).name + "'"; };

    std::vector<char> defined(g.values.size(), 0);
    std::set<std::string> visible;
    for (ValueId v : g.inputs) {
      if (!valid(v)) return invalid_model(where + ": graph input id " + std::to_string(v) + " does not exist");
      if (g.value(v).producer >= 0) return invalid_model(where + ": graph input " + vname(v) + " also has a producer");
      defined[v] = 1;
    }
    for (ValueId v : g.outer_refs) {
      if (!valid(v)) return invalid_model(where + ": outer reference id " + std::to_string(v) + " does not exist");
      if (!outer) return invalid_model(where + ": outer reference " + vname(v) + " in a top-level graph");
      if (!resolves(g.value(v).name, outer)) return invalid_model(where + ": outer reference " + vname(v) + " names no value of an enclosing graph");
      defined[v] = 1;
    }
    for (const Value& v : g.values) {
      if (v.constant) defined[v.id] = 1;
      if (v.producer >= static_cast<NodeId>(g.nodes.size())) return invalid_model(where + ": value '" + v.name + "' names a producer node that does not exist");
      if (v.quant) {  // quantization parameters (docs/decisions/0033): consistent, and of the value's dtype
        std::vector<int64_t> dims;
        if (v.shape)
          for (const Dim& d : *v.shape) dims.push_back(d.is_known() ? d.value : -1);
        Status qs = validate_quant_params(*v.quant, v.shape ? &dims : nullptr, where + ": value '" + v.name + "'");
        if (!qs.ok()) return invalid_model(qs.message());
        if (v.dtype != v.quant->type)
          return invalid_model(where + ": value '" + v.name + "' has dtype " + dtype_name(v.dtype) +
                               " but quantization type " + dtype_name(v.quant->type));
      }
    }
    for (ValueId v = 0; v < static_cast<ValueId>(g.values.size()); ++v)
      if (defined[v]) visible.insert(g.value(v).name);

    std::vector<NodeId> producer_seen(g.values.size(), -1);
    for (const Node& n : g.nodes) {
      if (n.removed) continue;
      const std::string at = where + ": " + n.describe();
      const Arity a = arity_at(n.op, n.opset);
      const int nin = static_cast<int>(n.inputs.size()), nout = static_cast<int>(n.outputs.size());
      if (nin < a.min_in || nin > a.max_in)
        return invalid_model(at + ": has " + std::to_string(nin) + " inputs, expected " + range_text(a.min_in, a.max_in));
      if (nout < a.min_out || nout > a.max_out)
        return invalid_model(at + ": has " + std::to_string(nout) + " outputs, expected " + range_text(a.min_out, a.max_out));
      for (int k = 0; k < nin; ++k) {
        const ValueId v = n.inputs[k];
        if (v == kNoValue) {
          if (k < a.min_in && !optional_leading(n.op, k)) return invalid_model(at + ": required input " + std::to_string(k) + " is missing");
          continue;
        }
        if (!valid(v)) return invalid_model(at + ": input " + std::to_string(k) + " has id " + std::to_string(v) + ", which does not exist");
        if (!defined[v]) return invalid_model(at + ": input " + std::to_string(k) + " (" + vname(v) + ") is used before it is defined");
      }
      for (const char* attr : required_attrs(n))
        if (!n.has_attr(attr)) return invalid_model(at + ": required attribute '" + attr + "' is missing");
      if (n.op == OpKind::kFusedPointwise) {
        auto prog = parse_pw_program(n.attr_string("program", ""));
        if (!prog.ok()) return invalid_model(at + ": " + prog.status().message());
        if (prog->num_inputs != nin)
          return invalid_model(at + ": the program reads " + std::to_string(prog->num_inputs) + " inputs, the layer has " + std::to_string(nin));
      }
      for (const auto& [k, attr] : n.attrs) {
        if (attr.kind != Attribute::Kind::kGraph) continue;
        if (!attr.g) return invalid_model(at + ": graph attribute '" + k + "' is empty");
        Scope s{&g, outer, &visible};
        Status st = run(*attr.g, &s);
        if (!st.ok()) return st.with_context(at + " attribute '" + k + "'");
      }
      for (int k = 0; k < nout; ++k) {
        const ValueId v = n.outputs[k];
        if (v == kNoValue) continue;
        if (!valid(v)) return invalid_model(at + ": output " + std::to_string(k) + " has id " + std::to_string(v) + ", which does not exist");
        if (defined[v]) {
          const NodeId p = producer_seen[v];
          return invalid_model(at + ": output " + vname(v) + " is already defined" +
                               (p >= 0 ? " by " + g.node(p).describe() : " (graph input or constant)"));
        }
        if (g.value(v).producer != n.id)
          return invalid_model(at + ": output " + vname(v) + " records producer " + std::to_string(g.value(v).producer) + ", not this node");
        defined[v] = 1;
        producer_seen[v] = n.id;
        visible.insert(g.value(v).name);
      }
    }
    for (const Value& v : g.values)
      if (v.producer >= 0 && producer_seen[v.id] != v.producer)
        return invalid_model(where + ": value '" + v.name + "' records producer " + std::to_string(v.producer) + ", which does not output it");
    for (ValueId v : g.outputs) {
      if (!valid(v)) return invalid_model(where + ": graph output id " + std::to_string(v) + " does not exist");
      if (!defined[v]) return invalid_model(where + ": graph output " + vname(v) + " is never produced");
    }
    return Status::Ok();
  }

 private:
  static std::string range_text(int lo, int hi) {
    if (hi >= kMany) return std::to_string(lo) + " or more";
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
  }

  // Loop's M and cond and Scan-8's sequence_lens may be omitted although they precede
  // required inputs.
  static bool optional_leading(OpKind op, int k) {
    return (op == OpKind::kLoop && k < 2) || (op == OpKind::kScan && k == 0);
  }

  static bool resolves(const std::string& name, const Scope* s) {
    for (; s; s = s->parent)
      if (s->visible->count(name)) return true;
    return false;
  }
};

}  // namespace

Status verify(const Graph& g) {
  Verifier v;
  return v.run(g, nullptr);
}

}  // namespace kiln::ir
