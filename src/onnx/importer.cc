// ModelProto -> ir::Graph: values, initializers, Constant folding, subgraphs (outer-scope
// names become Graph::outer_refs), and one error listing every unsupported op.
#include "onnx/importer.h"

#include <fstream>
#include <set>
#include <sstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include "core/checked_size.h"
#include "io/input_file.h"
#include "ir/verifier.h"
#include "kiln/plan.h"
#include "onnx/lowered_ops.h"
#include "onnx/op_attributes.h"

namespace kiln::onnx_import {
namespace {

// Attributes Kiln's passes put on ONNX ops (ops.def): Gemm's activation (fuse_gemm_activation).
bool is_internal_attribute(const std::string& op_type, const std::string& name) {
  return op_type == "Gemm" && name == "activation";
}

struct Unsupported {
  std::vector<std::string> items;    // "node 'x' (Foo, domain 'ai.onnx', opset 13)"
  std::vector<std::string> unknown;  // attributes, opsets, IR versions newer than Kiln knows
};

class GraphImporter {
 public:
  GraphImporter(const std::string& base_dir, const std::map<std::string, int64_t>& opsets, Unsupported* unsup)
      : base_dir_(base_dir), opsets_(opsets), unsup_(unsup) {}

  // `outer` lists names visible from enclosing graphs (for subgraphs); empty at top level.
  Status import(const onnx::GraphProto& gp, const std::set<std::string>& outer, ir::Graph* g) {
    g->name = gp.name();
    g->opset_imports = opsets_;
    const std::string where = "graph '" + gp.name() + "'";
    for (const auto& init : gp.initializer()) {
      if (init.name().empty()) return invalid_model(where + ": an initializer has an empty name");
      if (g->find_value(init.name()) != ir::kNoValue)
        return invalid_model(where + ": initializer '" + init.name() + "' is defined twice");
      auto t = tensor_from_proto(init, base_dir_);
      if (!t.ok()) return t.status().with_context("initializer '" + init.name() + "'");
      ir::ValueId v = g->add_value(init.name(), t->dtype());
      g->value(v).constant = std::make_shared<Tensor>(std::move(t).value());
      g->value(v).shape = known_shape(g->value(v).constant->shape());
    }
    if (gp.sparse_initializer_size() > 0) return unsupported("graph '" + gp.name() + "': sparse initializers are not supported");
    std::set<std::string> input_names;
    for (const auto& in : gp.input()) {
      if (in.name().empty()) return invalid_model(where + ": graph input #" + std::to_string(input_names.size()) + " has an empty name");
      if (!input_names.insert(in.name()).second) return invalid_model(where + ": graph input '" + in.name() + "' is listed twice");
      if (g->find_value(in.name()) != ir::kNoValue) continue;  // an initializer with a default value
      ir::ValueId v = g->add_value(in.name());
      KILN_RETURN_IF_ERROR(read_type(in, &g->value(v)));
      g->inputs.push_back(v);
    }
    std::map<std::string, const onnx::ValueInfoProto*> infos;
    for (const auto& vi : gp.value_info()) infos[vi.name()] = &vi;
    for (const auto& vi : gp.output()) infos[vi.name()] = &vi;

    int index = 0;
    for (const auto& np : gp.node()) {
      KILN_RETURN_IF_ERROR(import_node(np, index++, outer, infos, g));
    }
    std::set<std::string> output_names;
    for (const auto& out : gp.output()) {
      if (out.name().empty()) return invalid_model(where + ": graph output #" + std::to_string(output_names.size()) + " has an empty name");
      if (!output_names.insert(out.name()).second) return invalid_model(where + ": graph output '" + out.name() + "' is listed twice");
      ir::ValueId v = g->find_value(out.name());
      if (v == ir::kNoValue) {
        if (outer.count(out.name())) {
          v = outer_ref(out.name(), g);
        } else {
          return invalid_model("graph '" + gp.name() + "': output '" + out.name() + "' is not produced by any node");
        }
      }
      if (g->value(v).dtype == DataType::kUndefined || !g->value(v).shape) {
        KILN_RETURN_IF_ERROR(read_type(out, &g->value(v)));
      }
      g->outputs.push_back(v);
    }
    return Status::Ok();
  }

 private:
  static ir::SymShape known_shape(const Shape& s) {
    ir::SymShape r;
    for (int64_t d : s) r.push_back(ir::Dim::known(d));
    return r;
  }

  // Reads a TypeProto: a tensor, a sequence of tensors, or an optional of either. Shapes are
  // kept for tensors only (a sequence's elements may differ in shape).
  static Status read_type_proto(const onnx::TypeProto& tp, const std::string& what, ir::Value* v) {
    // An empty TypeProto (allowed by ONNX; exporters leave If/Loop outputs so) says nothing:
    // the value stays an untyped tensor and shape inference takes its type from the producer.
    if (tp.value_case() == onnx::TypeProto::VALUE_NOT_SET) return Status::Ok();
    const onnx::TypeProto* t = &tp;
    bool optional = false, sequence = false;
    if (t->has_optional_type()) {
      optional = true;
      t = &t->optional_type().elem_type();
    }
    if (t->has_sequence_type()) {
      sequence = true;
      t = &t->sequence_type().elem_type();
    }
    if (!t->has_tensor_type()) {
      return unsupported(what + ": only tensors and sequences/optionals of tensors are supported (maps, sparse "
                         "tensors and nested sequences are not)");
    }
    v->kind = optional ? (sequence ? ir::ValueKind::kOptionalSequence : ir::ValueKind::kOptionalTensor)
                       : (sequence ? ir::ValueKind::kSequence : ir::ValueKind::kTensor);
    const auto& tt = t->tensor_type();
    DataType dt = dtype_from_onnx(tt.elem_type());
    if (dt == DataType::kUndefined && tt.elem_type() != 0)
      return unsupported(what + ": ONNX element type " + std::to_string(tt.elem_type()) + " is not supported");
    if (dt != DataType::kUndefined) v->dtype = dt;
    if (tt.has_shape() && v->kind == ir::ValueKind::kTensor) {
      Status rank = check_rank(static_cast<size_t>(tt.shape().dim_size()), what);
      if (!rank.ok()) return invalid_model(rank.message());
      ir::SymShape s;
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) s.push_back(ir::Dim::known(d.dim_value()));
        else if (d.has_dim_param()) s.push_back(ir::Dim::sym(d.dim_param()));
        else s.push_back(ir::Dim{});
      }
      v->shape = std::move(s);
    }
    return Status::Ok();
  }

  static Status read_type(const onnx::ValueInfoProto& vi, ir::Value* v) {
    if (!vi.has_type()) return Status::Ok();
    return read_type_proto(vi.type(), "value '" + vi.name() + "'", v);
  }

  // Each attribute must be one the op's schema defines at the node's opset (else it is listed in
  // unsup_->unknown: an error, or a warning under allow_unknown_attributes), with the schema's type
  // (else the model is malformed). Ops newer than the opset are left to the kernels.
  Status check_attributes(const onnx::NodeProto& np, const std::string& nname, int64_t opset) {
    const OpSchemaAttrs* schema = op_schema(np.op_type(), opset);
    if (!schema) return Status::Ok();
    for (const auto& a : np.attribute()) {
      auto it = schema->attrs.find(a.name());
      const std::string at = "node '" + nname + "' (" + np.op_type() + "): attribute '" + a.name() + "'";
      if (it == schema->attrs.end()) {
        // Kiln's own attribute on an ONNX op (a fusion's result): taking it from a model would
        // change what the layer computes, so it is refused even under --allow-unknown-attributes.
        if (is_internal_attribute(np.op_type(), a.name()))
          return unsupported(at + " is Kiln's internal attribute (set only by its passes, docs/decisions/0058); "
                             "a model may not set it, not even with --allow-unknown-attributes");
        std::string known;
        for (const auto& [k, t] : schema->attrs) known += (known.empty() ? "" : ", ") + k;
        unsup_->unknown.push_back(at + " is not an attribute of " + np.op_type() + "-" +
                                  std::to_string(schema->since_version) + " (opset " + std::to_string(opset) +
                                  "; it has " + (known.empty() ? std::string("none") : known) + ")");
        continue;
      }
      if (static_cast<int>(a.type()) != static_cast<int>(it->second))
        return invalid_model(at + " has type " + onnx::AttributeProto::AttributeType_Name(a.type()) + ", " +
                             np.op_type() + "-" + std::to_string(schema->since_version) + " defines it as " +
                             attr_type_name(it->second));
    }
    return Status::Ok();
  }

  ir::ValueId outer_ref(const std::string& name, ir::Graph* g) {
    ir::ValueId v = g->add_value(name);
    g->outer_refs.push_back(v);
    return v;
  }

  Status fold_constant(const onnx::NodeProto& np, const std::string& nname, ir::Graph* g) {
    if (np.output_size() != 1) return invalid_model("node '" + nname + "' (Constant): expected 1 output");
    Tensor t;
    for (const auto& a : np.attribute()) {
      const std::string& k = a.name();
      if (k == "value") {
        auto r = tensor_from_proto(a.t(), base_dir_);
        if (!r.ok()) return r.status().with_context("node '" + nname + "' (Constant)");
        t = std::move(r).value();
      } else if (k == "value_float") {
        t = Tensor::scalar<float>(DataType::kFloat32, a.f());
      } else if (k == "value_int") {
        t = Tensor::scalar<int64_t>(DataType::kInt64, a.i());
      } else if (k == "value_floats") {
        t = Tensor(DataType::kFloat32, {a.floats_size()});
        for (int i = 0; i < a.floats_size(); ++i) t.data<float>()[i] = a.floats(i);
      } else if (k == "value_ints") {
        t = Tensor(DataType::kInt64, {a.ints_size()});
        for (int i = 0; i < a.ints_size(); ++i) t.data<int64_t>()[i] = a.ints(i);
      } else {
        return unsupported("node '" + nname + "' (Constant): attribute '" + k + "' is not supported");
      }
    }
    if (!t.defined()) return invalid_model("node '" + nname + "' (Constant): no value attribute");
    ir::ValueId v = g->add_value(np.output(0), t.dtype());
    g->value(v).shape = known_shape(t.shape());
    g->value(v).constant = std::make_shared<Tensor>(std::move(t));
    return Status::Ok();
  }

  Status import_node(const onnx::NodeProto& np, int index, const std::set<std::string>& outer,
                     const std::map<std::string, const onnx::ValueInfoProto*>& infos, ir::Graph* g) {
    const std::string nname = np.name().empty() ? np.op_type() + "_" + std::to_string(index) : np.name();
    const std::string domain = (np.domain() == "ai.onnx") ? "" : np.domain();
    auto opset_it = opsets_.find(domain);
    const int64_t opset = opset_it == opsets_.end() ? -1 : opset_it->second;
    if (domain.empty() && np.op_type() == "Constant") return fold_constant(np, nname, g);

    std::optional<ir::OpKind> op;
    // Ops newer than the ONNX 1.12 schema that import as several Kiln layers (lowered_ops.h).
    const bool lowered = domain.empty() && is_lowered_op(np.op_type(), opset);
    if (domain.empty()) op = ir::op_from_onnx(np.op_type());
    if (lowered) op = ir::OpKind::kIdentity;  // placeholder: lower_op emits the layers
    if (!op) {
      unsup_->items.push_back("node '" + nname + "' (" + np.op_type() + ", domain '" +
                              (domain.empty() ? "ai.onnx" : domain) + "', opset " + std::to_string(opset) + ")");
    }
    if (op) KILN_RETURN_IF_ERROR(check_attributes(np, nname, opset));
    ir::Node n;
    n.name = nname;
    n.op = op.value_or(ir::OpKind::kIdentity);
    n.opset = static_cast<int>(opset);
    for (const auto& in : np.input()) {
      if (in.empty()) { n.inputs.push_back(ir::kNoValue); continue; }
      ir::ValueId v = g->find_value(in);
      if (v == ir::kNoValue) {
        if (!outer.count(in))
          return invalid_model("node '" + nname + "' (" + np.op_type() + "): input '" + in + "' is not defined before use");
        v = outer_ref(in, g);
      }
      n.inputs.push_back(v);
    }
    for (const auto& a : np.attribute()) {
      ir::Attribute attr;
      switch (a.type()) {
        case onnx::AttributeProto::INT: attr.kind = ir::Attribute::Kind::kInt; attr.i = a.i(); break;
        case onnx::AttributeProto::FLOAT: attr.kind = ir::Attribute::Kind::kFloat; attr.f = a.f(); break;
        case onnx::AttributeProto::STRING: attr.kind = ir::Attribute::Kind::kString; attr.s = a.s(); break;
        case onnx::AttributeProto::INTS:
          attr.kind = ir::Attribute::Kind::kInts;
          attr.ints.assign(a.ints().begin(), a.ints().end());
          break;
        case onnx::AttributeProto::FLOATS:
          attr.kind = ir::Attribute::Kind::kFloats;
          attr.floats.assign(a.floats().begin(), a.floats().end());
          break;
        case onnx::AttributeProto::STRINGS:
          attr.kind = ir::Attribute::Kind::kStrings;
          attr.strings.assign(a.strings().begin(), a.strings().end());
          break;
        case onnx::AttributeProto::TENSOR: {
          auto t = tensor_from_proto(a.t(), base_dir_);
          if (!t.ok()) return t.status().with_context("node '" + nname + "' attribute '" + a.name() + "'");
          attr.kind = ir::Attribute::Kind::kTensor;
          attr.t = std::make_shared<Tensor>(std::move(t).value());
          break;
        }
        case onnx::AttributeProto::GRAPH: {
          std::set<std::string> visible = outer;
          for (const auto& v : g->values) visible.insert(v.name);
          auto sub = std::make_shared<ir::Graph>();
          GraphImporter child(base_dir_, opsets_, unsup_);
          KILN_RETURN_IF_ERROR(child.import(a.g(), visible, sub.get()).with_context("node '" + nname + "' attribute '" + a.name() + "'"));
          attr.kind = ir::Attribute::Kind::kGraph;
          attr.g = sub;
          break;
        }
        case onnx::AttributeProto::TYPE_PROTO: {
          ir::Value tv;
          KILN_RETURN_IF_ERROR(read_type_proto(a.tp(), "node '" + nname + "' attribute '" + a.name() + "'", &tv));
          attr.kind = ir::Attribute::Kind::kType;
          attr.type_kind = tv.kind;
          attr.type_dtype = tv.dtype;
          break;
        }
        default:
          return unsupported("node '" + nname + "' (" + np.op_type() + "): attribute '" + a.name() + "' has an unsupported type");
      }
      n.attrs[a.name()] = std::move(attr);
    }
    for (const auto& out : np.output()) {
      if (out.empty()) { n.outputs.push_back(ir::kNoValue); continue; }
      if (g->find_value(out) != ir::kNoValue && g->value(g->find_value(out)).producer >= 0)
        return invalid_model("node '" + nname + "': output '" + out + "' is produced twice");
      ir::ValueId v = g->add_value(out);
      auto it = infos.find(out);
      if (it != infos.end()) KILN_RETURN_IF_ERROR(read_type(*it->second, &g->value(v)));
      n.outputs.push_back(v);
    }
    // QuantizeLinear-23's `precision` would collide with the node attribute "precision" (each
    // layer's decided precision, ir/layer_annotations.h, erased and rewritten by assign_precisions).
    if (domain.empty() && n.op == ir::OpKind::kQuantizeLinear && n.attrs.count("precision")) {
      n.attrs["quantize_precision"] = n.attrs.at("precision");
      n.attrs.erase("precision");
    }
    if (lowered) return lower_op(np.op_type(), std::move(n), g);
    g->add_node(std::move(n));
    return Status::Ok();
  }

  std::string base_dir_;
  std::map<std::string, int64_t> opsets_;
  Unsupported* unsup_;
};

}  // namespace

namespace {

// SequenceProto / OptionalProto element kinds (onnx-data.proto).
constexpr int kProtoTensor = 1;
constexpr int kProtoSequence = 3;

StatusOr<Tensor> sequence_from_proto(const onnx::SequenceProto& p, const std::string& dir, DataType elem) {
  if (p.elem_type() != kProtoTensor && !(p.elem_type() == 0 && p.tensor_values_size() == 0))
    return unsupported("only sequences of tensors are supported (SequenceProto elem_type " + std::to_string(p.elem_type()) + ")");
  std::vector<Tensor> items;
  for (const auto& tp : p.tensor_values()) {
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(tp, dir));
    items.push_back(std::move(t));
  }
  const DataType dt = items.empty() ? elem : items[0].dtype();
  return Tensor::sequence(dt == DataType::kUndefined ? DataType::kFloat32 : dt, std::move(items));
}

}  // namespace

StatusOr<Tensor> load_value_pb_file(const std::string& path, ir::ValueKind kind, DataType elem) {
  if (kind == ir::ValueKind::kTensor) return load_tensor_pb_file(path);
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("value file '" + path + "' not found");
  std::stringstream ss;
  ss << f.rdbuf();
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (kind == ir::ValueKind::kSequence) {
    onnx::SequenceProto p;
    if (!p.ParseFromString(ss.str())) return invalid_model("'" + path + "' is not a serialized ONNX SequenceProto");
    return sequence_from_proto(p, dir, elem);
  }
  onnx::OptionalProto p;
  if (!p.ParseFromString(ss.str())) return invalid_model("'" + path + "' is not a serialized ONNX OptionalProto");
  if (p.has_tensor_value()) return tensor_from_proto(p.tensor_value(), dir);
  if (p.has_sequence_value()) return sequence_from_proto(p.sequence_value(), dir, elem);
  if (p.elem_type() != 0 && p.elem_type() != kProtoTensor && p.elem_type() != kProtoSequence)
    return unsupported("only optionals of tensors or sequences are supported (OptionalProto elem_type " +
                       std::to_string(p.elem_type()) + ")");
  return Tensor::none(elem);
}

StatusOr<ir::Graph> import_model_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& options) {
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  if (bytes.empty()) return invalid_model("the file is empty, not an ONNX model");
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    return invalid_model("cannot parse the ONNX ModelProto: the file is truncated, corrupt or not an ONNX model");
  if (!model.has_graph()) return invalid_model("the ModelProto has no graph (truncated or not an ONNX model)");
  if (model.ir_version() < 3) return invalid_model("ONNX IR version " + std::to_string(model.ir_version()) + " is too old (need >= 3)");
  Unsupported unsup;
  if (model.ir_version() > kNewestKnownIrVersion)
    unsup.unknown.push_back("ONNX IR version " + std::to_string(model.ir_version()) + " is newer than Kiln reads (" +
                            std::to_string(kNewestKnownIrVersion) + ")");
  std::map<std::string, int64_t> opsets;
  for (const auto& o : model.opset_import()) opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  if (opsets.count("") && opsets[""] < 1) return invalid_model("invalid ai.onnx opset version " + std::to_string(opsets[""]));
  if (opsets.count("") && opsets[""] > kNewestKnownOpset)
    unsup.unknown.push_back("ai.onnx opset " + std::to_string(opsets[""]) + " is newer than Kiln knows (" +
                            std::to_string(kNewestKnownOpset) + "); its ops may mean something else");
  if (model.functions_size() > 0) return unsupported("model-local functions are not supported");
  if (model.graph().output_size() == 0)
    return invalid_model("graph '" + model.graph().name() + "' has no outputs (a model must produce at least one)");

  ir::Graph g;
  GraphImporter imp(base_dir, opsets, &unsup);
  KILN_RETURN_IF_ERROR(imp.import(model.graph(), {}, &g));
  if (!unsup.items.empty()) {
    std::string msg = std::to_string(unsup.items.size()) + " unsupported op" + (unsup.items.size() > 1 ? "s" : "") + ":";
    for (const auto& s : unsup.items) msg += "\n  " + s;
    return unsupported(msg);
  }
  if (!unsup.unknown.empty()) {
    if (!options.allow_unknown) {
      std::string msg = std::to_string(unsup.unknown.size()) + " item" + (unsup.unknown.size() > 1 ? "s" : "") +
                        " Kiln does not know and would ignore (kiln build --allow-unknown-attributes ignores "
                        "them with a warning each):";
      for (const auto& s : unsup.unknown) msg += "\n  " + s;
      return unsupported(msg);
    }
    if (options.warnings)
      for (const auto& s : unsup.unknown) options.warnings->push_back(s + " (ignored: --allow-unknown-attributes)");
  }
  // Structural checks (arity, required inputs, producers) before any pass reads the graph.
  Status v = ir::verify(g);
  if (!v.ok()) return invalid_model(v.message());
  return g;
}

StatusOr<ir::Graph> import_model_file(const std::string& path, const ImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, io::read_input_file(path, "ONNX model"));
  if (bytes.compare(0, sizeof(kPlanMagic) - 1, kPlanMagic) == 0)  // kiln/plan.h
    return invalid_argument("'" + path + "' is a Kiln plan, not an ONNX model (run it with `kiln run`)");
  auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  auto g = import_model_bytes(bytes, dir, options);
  if (!g.ok()) return g.status().with_context("'" + path + "'");
  return g;
}

bool looks_like_onnx(const std::string& bytes) {
  onnx::ModelProto model;
  return !bytes.empty() && model.ParseFromString(bytes) && model.has_graph() && model.ir_version() > 0;
}

}  // namespace kiln::onnx_import
