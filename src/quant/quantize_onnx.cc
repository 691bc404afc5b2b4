// Post-training quantization of an ONNX model into Q/DQ form (kiln/quantize.h,
// docs/decisions/0050). Three steps:
//  1. targets: the Conv / Gemm / MatMul nodes of the main graph with a float initializer weight;
//  2. calibration: the imported (unoptimized) graph runs on the CPU reference over the samples,
//     and every activation a target reads is observed (AbsHistogram, calibrator.h; the per-batch
//     amax history for `delayed`, delayed_scaling.h) — or the scales come from the cache;
//  3. rewrite: the ModelProto gets Q -> DQ on each such activation and a quantized initializer +
//     DequantizeLinear for each weight, inserted just before the first node that reads them (the
//     node order stays topological); the targets read the DQ outputs.
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "backends/cpu/interpreter.h"
#include "core/numerics.h"
#include "core/onnx_dtype.h"
#include "io/input_file.h"
#include "ir/shape_inference.h"
#include "io/npy.h"
#include "io/npz.h"
#include "kiln/plan.h"
#include "kiln/quantize.h"
#include "onnx/importer.h"
#include "quant/accuracy_budget.h"
#include "quant/calibration_cache.h"
#include "quant/calibrator.h"
#include "quant/delayed_scaling.h"

namespace kiln {

const char* quant_format_name(QuantFormat f) { return f == QuantFormat::kFp8E4M3 ? "fp8e4m3" : "int8"; }

namespace {

namespace fs = std::filesystem;

double qmax_of(QuantFormat f) { return f == QuantFormat::kFp8E4M3 ? 448.0 : 127.0; }

// A resolved calibrator spec.
struct Calibrator {
  enum Kind { kEntropy, kMinMax, kPercentile, kMse, kDelayed } kind = kEntropy;
  double percentile = 99.99;
  quant::DelayedScaling delayed;
  std::string spec;  // canonical text (cache header, reports)
  bool needs_histogram() const { return kind == kEntropy || kind == kPercentile || kind == kMse; }
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  while (true) {
    const size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return out;
    b = e + 1;
  }
}

StatusOr<Calibrator> parse_calibrator(const std::string& text, QuantFormat format) {
  (void)format;
  const std::string s = text.empty() ? "minmax" : text;
  const std::vector<std::string> f = split(s, ':');
  Calibrator c;
  auto bad = [&](const std::string& why) {
    return invalid_argument("calibrator '" + s + "': " + why +
                            " (expected entropy, minmax, percentile[:P], mse or delayed[:N[:max|most_recent[:M]]])");
  };
  auto number = [&](const std::string& v, double* out) {
    char* end = nullptr;
    *out = std::strtod(v.c_str(), &end);
    return !v.empty() && *end == 0 && std::isfinite(*out);
  };
  if (f[0] == "entropy" || f[0] == "minmax" || f[0] == "mse") {
    if (f.size() != 1) return bad("takes no parameter");
    c.kind = f[0] == "entropy" ? Calibrator::kEntropy : f[0] == "minmax" ? Calibrator::kMinMax : Calibrator::kMse;
    c.spec = f[0];
  } else if (f[0] == "percentile") {
    c.kind = Calibrator::kPercentile;
    if (f.size() > 2) return bad("too many parameters");
    if (f.size() == 2 && (!number(f[1], &c.percentile) || c.percentile <= 0 || c.percentile > 100))
      return bad("the percentile must be a number in (0, 100]");
    char buf[64];
    std::snprintf(buf, sizeof buf, "percentile:%g", c.percentile);
    c.spec = buf;
  } else if (f[0] == "delayed") {
    c.kind = Calibrator::kDelayed;
    if (f.size() > 4) return bad("too many parameters");
    double v = 0;
    if (f.size() > 1) {
      if (!number(f[1], &v) || v < 1 || v != std::floor(v) || v > 1e7) return bad("history length must be an integer >= 1");
      c.delayed.history_len = static_cast<int>(v);
    }
    if (f.size() > 2) {
      if (f[2] == "max") c.delayed.algo = quant::AmaxAlgo::kMax;
      else if (f[2] == "most_recent") c.delayed.algo = quant::AmaxAlgo::kMostRecent;
      else return bad("the amax algorithm must be max or most_recent");
    }
    if (f.size() > 3) {
      if (!number(f[3], &v) || v < 0 || v != std::floor(v) || v > 64) return bad("the margin must be an integer in [0, 64]");
      c.delayed.margin = static_cast<int>(v);
    }
    KILN_RETURN_IF_ERROR(c.delayed.check());
    c.spec = "delayed:" + std::to_string(c.delayed.history_len) + ":" +
             (c.delayed.algo == quant::AmaxAlgo::kMax ? "max" : "most_recent") + ":" + std::to_string(c.delayed.margin);
  } else {
    return bad("unknown method '" + f[0] + "'");
  }
  return c;
}

bool excluded(const std::string& node, const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    if (!p.empty() && p.back() == '*' ? node.rfind(p.substr(0, p.size() - 1), 0) == 0 : node == p) return true;
  }
  return false;
}

// One Conv / Gemm / MatMul to quantize.
struct Target {
  int node = -1;            // index in the ModelProto graph's node list
  std::string activation;   // the float input it reads
  int act_input = 0;        // its input slot
  std::string weight;       // the initializer
  int weight_input = 1;
  int64_t weight_axis = 0;  // output-channel axis of the weight
  bool linear = false;      // Gemm / MatMul (QuantizeConfig::per_tensor_weights applies)
};

// What one activation's samples showed.
struct Observed {
  quant::AbsHistogram hist{2048};
  double max_abs = 0;
  quant::AmaxHistory history{1};
  bool seen = false;
};

}  // namespace

namespace quant {

StatusOr<std::vector<Tensor>> load_calibration_samples(const std::string& path, const ir::Graph& g) {
  std::map<std::string, Tensor> by_name;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.path().extension() != ".npy") continue;
      KILN_ASSIGN_OR_RETURN(Tensor t, io::read_npy(e.path().string()));
      by_name[e.path().stem().string()] = std::move(t);
    }
    if (by_name.empty()) return invalid_argument("calibration data '" + path + "': the directory holds no .npy files");
  } else {
    KILN_ASSIGN_OR_RETURN(auto arrays, io::read_npz(path));
    for (auto& [name, t] : arrays) by_name[name] = std::move(t);
  }
  std::vector<Tensor> out;
  int64_t samples = -1;
  std::string first;
  std::set<std::string> used;
  for (ir::ValueId id : g.inputs) {
    const ir::Value& v = g.value(id);
    auto it = by_name.find(v.name);
    if (it == by_name.end()) {
      std::string have;
      for (const auto& [n, t] : by_name) have += (have.empty() ? "" : ", ") + n;
      return invalid_argument("calibration data '" + path + "' has no array for input '" + v.name + "' (it holds: " +
                              have + ")");
    }
    used.insert(v.name);
    Tensor t = it->second;
    const std::string what = "calibration data '" + path + "' array '" + v.name + "'";
    if (v.shape) {
      if (t.rank() != static_cast<int>(v.shape->size()))
        return invalid_argument(what + " has rank " + std::to_string(t.rank()) + "; input '" + v.name + "' is " +
                                ir::sym_shape_str(*v.shape) + " (samples are stacked along dim 0)");
      for (int d = 1; d < t.rank(); ++d)
        if ((*v.shape)[d].is_known() && (*v.shape)[d].value != t.dim(d))
          return invalid_argument(what + " has shape " + shape_str(t.shape()) + "; input '" + v.name + "' is " +
                                  ir::sym_shape_str(*v.shape));
    }
    if (t.rank() == 0 || t.dim(0) == 0) return invalid_argument(what + " holds no samples");
    if (samples < 0) {
      samples = t.dim(0);
      first = v.name;
    } else if (t.dim(0) != samples) {
      return invalid_argument(what + " holds " + std::to_string(t.dim(0)) + " samples, '" + first + "' " +
                              std::to_string(samples));
    }
    if (t.dtype() != v.dtype) {
      const bool ok = (dtype_is_float(t.dtype()) && dtype_is_float(v.dtype)) ||
                      (dtype_is_integer(t.dtype()) && dtype_is_integer(v.dtype));
      if (!ok)
        return invalid_argument(what + " is " + dtype_name(t.dtype()) + "; input '" + v.name + "' is " +
                                dtype_name(v.dtype));
      KILN_ASSIGN_OR_RETURN(t, cast_tensor(t, v.dtype));
    }
    out.push_back(std::move(t));
  }
  for (const auto& [n, t] : by_name)
    if (!used.count(n)) return invalid_argument("calibration data '" + path + "' has an array '" + n + "' the model has no input for");
  return out;
}

}  // namespace quant

namespace {

using quant::load_calibration_samples;

// A float32 TensorProto / int8 / fp8 initializer from raw bytes.
void set_raw(onnx::TensorProto* t, const std::string& name, int onnx_type, const Shape& dims, const void* data,
             size_t bytes) {
  t->Clear();
  t->set_name(name);
  t->set_data_type(onnx_type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(static_cast<const char*>(data), bytes));
}

std::string unique_name(std::set<std::string>& names, const std::string& want) {
  std::string n = want;
  for (int i = 1; names.count(n); ++i) n = want + "_" + std::to_string(i);
  names.insert(n);
  return n;
}

// The opset 13..18 -> 19 upgrade of FP8 quantization (see its caller). Subgraphs holding a Reduce
// op with an `axes` attribute are refused rather than rewritten.
Status upgrade_to_opset19(onnx::ModelProto* m, const std::string& path) {
  static const std::set<std::string> kAxesToInput = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                                     "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                                     "ReduceSumSquare"};
  onnx::GraphProto* g = m->mutable_graph();
  std::set<std::string> names;
  for (const auto& t : g->initializer()) names.insert(t.name());
  for (const auto& n : g->node())
    for (const auto& o : n.output()) names.insert(o);
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto* n = g->mutable_node(i);
    if (!(n->domain().empty() || n->domain() == "ai.onnx")) continue;
    for (const auto& a : n->attribute())
      if (a.has_g() || a.graphs_size() > 0) {
        std::function<bool(const onnx::GraphProto&)> has_reduce = [&](const onnx::GraphProto& sg) {
          for (const auto& sn : sg.node()) {
            if (kAxesToInput.count(sn.op_type())) return true;
            for (const auto& sa : sn.attribute()) {
              if (sa.has_g() && has_reduce(sa.g())) return true;
              for (const auto& gg : sa.graphs())
                if (has_reduce(gg)) return true;
            }
          }
          return false;
        };
        if ((a.has_g() && has_reduce(a.g())) || std::any_of(a.graphs().begin(), a.graphs().end(), has_reduce))
          return unsupported("quantize: '" + path + "' node '" + n->name() +
                             "' has a subgraph with Reduce ops; FP8 needs opset 19: re-export the model with opset 19+");
      }
    if (!kAxesToInput.count(n->op_type())) continue;
    int axes_at = -1;
    for (int k = 0; k < n->attribute_size(); ++k)
      if (n->attribute(k).name() == "axes") axes_at = k;
    if (axes_at < 0) continue;  // all axes: the same without the input
    const auto& axes = n->attribute(axes_at).ints();
    std::string an = unique_name(names, (n->name().empty() ? n->op_type() : n->name()) + "_axes");
    const std::vector<int64_t> v(axes.begin(), axes.end());
    set_raw(g->add_initializer(), an, onnx::TensorProto::INT64, Shape{static_cast<int64_t>(v.size())}, v.data(),
            v.size() * sizeof(int64_t));
    n->mutable_attribute()->DeleteSubrange(axes_at, 1);
    if (n->input_size() < 1) return invalid_model("'" + path + "' node '" + n->name() + "' has no input");
    if (n->input_size() == 1) n->add_input(an);
    else n->set_input(1, an);
  }
  for (auto& o : *m->mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") o.set_version(19);
  if (m->ir_version() < 9) m->set_ir_version(9);
  return Status::Ok();
}

int64_t opset_of(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

}  // namespace

StatusOr<std::string> quantize_onnx(const std::string& onnx_path, const QuantizeConfig& config,
                                    QuantizeReport* report) {
  if (config.max_error != 0) return quant::quantize_within_budget(onnx_path, config, report);
  QuantizeReport local;
  QuantizeReport& rep = report ? *report : local;
  rep = QuantizeReport{};
  KILN_ASSIGN_OR_RETURN(Calibrator cal, parse_calibrator(config.calibrator, config.format));
  rep.calibrator = cal.spec;
  if (config.batch_size < 0) return invalid_argument("quantize: batch size " + std::to_string(config.batch_size) + " < 0");
  if (config.data.empty() && config.cache.empty())
    return invalid_argument("quantize: needs calibration data (--calib: a .npz or a directory of .npy files) or a "
                            "calibration cache (--calib-cache)");

  KILN_ASSIGN_OR_RETURN(std::string bytes, io::read_input_file(onnx_path, "ONNX model"));
  const uint64_t model_hash = fnv1a64(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes) || !model.has_graph())
    return invalid_model("'" + onnx_path + "' does not parse as an ONNX model");
  const std::string base_dir = fs::path(onnx_path).parent_path().string();
  int64_t opset = opset_of(model);
  const bool fp8 = config.format == QuantFormat::kFp8E4M3;
  if (fp8 && opset < 13)
    return unsupported("quantize: FP8 Q/DQ needs ONNX opset 19 (QuantizeLinear-19 adds float8); '" + onnx_path +
                       "' imports opset " + std::to_string(opset) + " (below 13): re-export it with opset 19+ or use --int8");
  // INT8 Q/DQ needs opset 10 (QuantizeLinear), per-channel weights opset 13 (its axis): an older
  // model is converted to opset 13 with ONNX's own version converter (libonnx), as ONNX Runtime's
  // quantizer does; where that fails, opset 10..12 keeps per-tensor weight scales.
  if (!fp8 && opset < 13) {
    std::string why;
    try {
      // The Softmax 12 -> 13 adapter needs its input's rank: Kiln's shape inference gives every
      // value's as value_info (ONNX's own stops at ops it cannot type).
      onnx::ModelProto typed = model;
      KILN_ASSIGN_OR_RETURN(ir::Graph g0, onnx_import::import_model_bytes(bytes, base_dir));
      KILN_RETURN_IF_ERROR(ir::infer_shapes(g0));
      std::set<std::string> declared;
      for (const auto& vi : typed.graph().value_info()) declared.insert(vi.name());
      for (const auto& vi : typed.graph().input()) declared.insert(vi.name());
      for (const auto& vi : typed.graph().output()) declared.insert(vi.name());
      for (const ir::Value& v : g0.values) {
        if (v.name.empty() || v.constant || !v.shape || v.dtype == DataType::kUndefined || declared.count(v.name)) continue;
        auto* vi = typed.mutable_graph()->add_value_info();
        vi->set_name(v.name);
        auto* tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(dtype_to_onnx(v.dtype));
        auto* sh = tt->mutable_shape();
        for (const ir::Dim& d : *v.shape) {
          auto* dim = sh->add_dim();
          if (d.is_known()) dim->set_dim_value(d.value);
          else dim->set_dim_param(d.symbol.empty() ? "unk_" + v.name : d.symbol);
        }
      }
      onnx::ModelProto up = onnx::version_conversion::ConvertVersion(typed, 13);
      if (up.ir_version() < 7) up.set_ir_version(7);
      model = std::move(up);
      if (config.logger)
        config.logger(LogSeverity::kInfo, "quantize: converted '" + onnx_path + "' from opset " + std::to_string(opset) +
                                              " to 13 (per-channel DequantizeLinear)");
      opset = 13;
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (opset < 10)
      return unsupported("quantize: '" + onnx_path + "' imports opset " + std::to_string(opset) +
                         ", before QuantizeLinear (opset 10), and ONNX's version converter could not upgrade it: " + why);
    if (!why.empty() && config.logger)
      config.logger(LogSeverity::kWarning, "quantize: opset " + std::to_string(opset) +
                                               " could not be converted to 13 (" + why +
                                               "): weights get one scale per tensor");
  }
  if (fp8 && opset < 19) {
    // Opset 13..18 -> 19 for FP8 Q/DQ. Between 13 and 19 the operators changed only by new types
    // and optional attributes/inputs with the old defaults (ONNX Changelog.md, opsets 14-19), except
    // the Reduce ops other than ReduceSum, whose `axes` became an input in opset 18: moved here.
    KILN_RETURN_IF_ERROR(upgrade_to_opset19(&model, onnx_path));
    if (config.logger)
      config.logger(LogSeverity::kInfo, "quantize: '" + onnx_path + "' moved from opset " + std::to_string(opset) +
                                            " to 19 (FP8 QuantizeLinear)");
    opset = 19;
  }
  const bool per_axis = opset >= 13;
  if (!config.e5m2.empty() && !fp8)
    return invalid_argument("quantize: E5M2 layers (" + config.e5m2.front() +
                            ", ...) are FP8: use format fp8 (kiln quantize --format fp8, kiln build --fp8)");
  // The graph that calibrates: the model as it will be written (converted), unquantized.
  std::string model_bytes;
  if (!model.SerializeToString(&model_bytes)) return invalid_model("'" + onnx_path + "' cannot be re-serialized");
  KILN_ASSIGN_OR_RETURN(ir::Graph g, onnx_import::import_model_bytes(model_bytes, base_dir));
  KILN_RETURN_IF_ERROR(ir::infer_shapes(g));  // every value's dtype: which inputs are float

  onnx::GraphProto* gp = model.mutable_graph();
  std::map<std::string, int> init_index;
  for (int i = 0; i < gp->initializer_size(); ++i) init_index[gp->initializer(i).name()] = i;
  // Weights: initializers, or outputs of Constant nodes (older exporters write those).
  std::map<std::string, int> constant_node;
  for (int i = 0; i < gp->node_size(); ++i) {
    const onnx::NodeProto& n = gp->node(i);
    if (n.op_type() == "Constant" && (n.domain().empty() || n.domain() == "ai.onnx") && n.output_size() == 1)
      for (const auto& a : n.attribute())
        if (a.name() == "value" && a.has_t()) constant_node[n.output(0)] = i;
  }
  auto constant_proto = [&](const std::string& name) -> const onnx::TensorProto* {
    if (auto it = init_index.find(name); it != init_index.end()) return &gp->initializer(it->second);
    if (auto it = constant_node.find(name); it != constant_node.end())
      for (const auto& a : gp->node(it->second).attribute())
        if (a.name() == "value") return &a.t();
    return nullptr;
  };
  // The float type of each graph input / value_info, where the model declares it.
  std::map<std::string, int> elem_type;
  auto note_types = [&](const auto& list) {
    for (const auto& vi : list)
      if (vi.type().has_tensor_type()) elem_type[vi.name()] = vi.type().tensor_type().elem_type();
  };
  note_types(gp->input());
  note_types(gp->value_info());
  note_types(gp->output());
  for (const ir::Value& v : g.values)
    if (!v.name.empty() && v.dtype != DataType::kUndefined) elem_type.emplace(v.name, dtype_to_onnx(v.dtype));
  auto is_float_value = [&](const std::string& name) {
    auto it = elem_type.find(name);
    return it != elem_type.end() && it->second == onnx::TensorProto::FLOAT;
  };

  // 1. Targets.
  std::vector<Target> targets;
  for (int i = 0; i < gp->node_size(); ++i) {
    const onnx::NodeProto& n = gp->node(i);
    if (!(n.domain().empty() || n.domain() == "ai.onnx")) continue;
    const std::string& op = n.op_type();
    if (op != "Conv" && op != "Gemm" && op != "MatMul") continue;
    const std::string name = n.name().empty() ? op + "_" + std::to_string(i) : n.name();
    auto skip = [&](const std::string& why) { rep.skipped.push_back(name + " (" + op + "): " + why); };
    if (excluded(name, config.exclude)) {
      skip("excluded");
      continue;
    }
    if (n.input_size() < 2) continue;
    Target t;
    t.node = i;
    t.activation = n.input(0);
    t.weight = n.input(1);
    const onnx::TensorProto* wp = constant_proto(t.weight);
    if (!wp) {
      skip("its weight '" + t.weight + "' is not a constant (an initializer or a Constant node)");
      continue;
    }
    const onnx::TensorProto& w = *wp;
    if (w.data_type() != onnx::TensorProto::FLOAT) {
      skip("its weight is not float32");
      continue;
    }
    if (constant_proto(t.activation)) {
      skip("its input '" + t.activation + "' is a constant");
      continue;
    }
    if (!is_float_value(t.activation)) {
      skip("its input '" + t.activation + "' is not float32");
      continue;
    }
    const int wr = w.dims_size();
    if (op == "Conv") {
      if (wr < 3) { skip("weight rank < 3"); continue; }
      t.weight_axis = 0;
    } else if (op == "Gemm") {
      int64_t trans_b = 0, trans_a = 0;
      for (const auto& a : n.attribute()) {
        if (a.name() == "transB") trans_b = a.i();
        if (a.name() == "transA") trans_a = a.i();
      }
      if (wr != 2) { skip("weight is not 2-D"); continue; }
      if (trans_a) { skip("transA = 1"); continue; }
      t.weight_axis = trans_b ? 0 : 1;
      t.linear = true;
    } else {
      if (wr != 2) { skip("weight is not 2-D"); continue; }
      t.weight_axis = 1;
      t.linear = true;
    }
    targets.push_back(t);
  }
  if (targets.empty())
    return unsupported("quantize: '" + onnx_path + "' has no Conv, Gemm or MatMul with a float32 initializer weight" +
                       (rep.skipped.empty() ? std::string() : " (left float: " + rep.skipped.front() + ", ...)"));

  // 2. Activation scales: from the cache, else by calibration.
  std::set<std::string> acts;
  for (const Target& t : targets) acts.insert(t.activation);
  // FP8 E5M2 activations: those read by a layer an E5M2 pattern names.
  std::set<std::string> e5m2_acts;
  std::string e5m2_spec;
  for (const std::string& p : config.e5m2) {
    bool matched = false;
    for (const Target& t : targets) {
      const onnx::NodeProto& n = gp->node(t.node);
      const std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(t.node) : n.name();
      if (excluded(name, {p})) {
        e5m2_acts.insert(t.activation);
        matched = true;
      }
    }
    if (!matched) return invalid_argument("quantize: the E5M2 pattern '" + p + "' matches no quantized layer");
    e5m2_spec += (e5m2_spec.empty() ? "" : ",") + p;
  }
  auto qmax_for = [&](const std::string& act) { return e5m2_acts.count(act) ? 57344.0 : qmax_of(config.format); };
  std::map<std::string, float> scales;
  bool cache_usable = false;
  std::error_code ec;
  if (!config.cache.empty() && fs::exists(config.cache, ec)) {
    KILN_ASSIGN_OR_RETURN(quant::CalibrationCache c, quant::read_calibration_cache(config.cache));
    char want[32], got[32];
    std::snprintf(want, sizeof want, "%016llx", static_cast<unsigned long long>(model_hash));
    std::snprintf(got, sizeof got, "%016llx", static_cast<unsigned long long>(c.model_hash));
    if (c.model_hash != model_hash)
      return invalid_argument("calibration cache '" + config.cache + "' was made for another model (model hash " +
                              got + "; '" + onnx_path + "' is " + want +
                              "): pass another --calib-cache path, or delete it to recalibrate");
    std::string mismatch;
    if (c.format != quant_format_name(config.format)) mismatch = "format " + c.format;
    else if (c.calibrator != cal.spec) mismatch = "calibrator " + c.calibrator;
    else if (c.e5m2 != e5m2_spec) mismatch = "E5M2 layers '" + c.e5m2 + "'";
    for (const std::string& a : acts)
      if (mismatch.empty() && !c.scales.count(a)) mismatch = "no scale for tensor '" + a + "'";
    if (mismatch.empty()) {
      cache_usable = true;
      for (const std::string& a : acts) scales[a] = c.scales.at(a);
      rep.from_cache = true;
      rep.samples = static_cast<int>(c.samples);
      if (config.logger) config.logger(LogSeverity::kInfo, "calibration: " + std::to_string(scales.size()) +
                                                               " scales from the cache '" + config.cache + "'");
    } else if (config.data.empty()) {
      return invalid_argument("calibration cache '" + config.cache + "' does not fit this build (" + mismatch +
                              "; this build wants format " + quant_format_name(config.format) + ", calibrator " +
                              cal.spec + ") and no calibration data (--calib) was given to recalibrate");
    } else if (config.logger) {
      config.logger(LogSeverity::kInfo, "calibration cache '" + config.cache + "' does not fit (" + mismatch +
                                            "): recalibrating and rewriting it");
    }
  }
  if (!cache_usable) {
    if (config.data.empty())
      return invalid_argument("calibration cache '" + config.cache +
                              "' does not exist and no calibration data (--calib) was given");
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> samples, load_calibration_samples(config.data, g));
    const int64_t count = samples.front().dim(0);
    // Samples per batch: an input's fixed batch dim, else the configured size.
    int64_t batch = config.batch_size > 0 ? config.batch_size : 8;
    bool fixed_batch = false;
    for (ir::ValueId id : g.inputs) {
      const ir::Value& v = g.value(id);
      if (v.shape && !v.shape->empty() && (*v.shape)[0].is_known()) {
        batch = std::max<int64_t>((*v.shape)[0].value, 1);
        fixed_batch = true;
      }
    }
    if (fixed_batch && count < batch)
      return invalid_argument("calibration data '" + config.data + "' holds " + std::to_string(count) +
                              " samples; the model's inputs take batches of " + std::to_string(batch));
    batch = std::min(batch, count);
    // A dynamic batch dim takes a last, smaller batch; a fixed one leaves the remainder out.
    int64_t batches = fixed_batch ? count / batch : (count + batch - 1) / batch;
    if (fixed_batch && count % batch && config.logger)
      config.logger(LogSeverity::kWarning, "calibration: " + std::to_string(count % batch) +
                                               " samples left out (the model's batch is fixed at " +
                                               std::to_string(batch) + ")");
    if (config.max_batches > 0) batches = std::min<int64_t>(batches, config.max_batches);
    std::map<std::string, Observed> seen;
    for (const std::string& a : acts) {
      Observed& o = seen[a];
      if (cal.kind == Calibrator::kDelayed) o.history = quant::AmaxHistory(cal.delayed.history_len);
    }
    auto observe = [&](const std::string& name, const Tensor& t) {
      auto it = seen.find(name);
      if (it == seen.end() || t.dtype() != DataType::kFloat32 || !t.raw()) return;
      Observed& o = it->second;
      o.seen = true;
      const float* p = t.data<float>();
      double m = 0;
      for (int64_t i = 0; i < t.numel(); ++i)
        if (std::isfinite(p[i])) m = std::max(m, static_cast<double>(std::fabs(p[i])));
      o.max_abs = std::max(o.max_abs, m);
      if (cal.needs_histogram()) o.hist.add(p, t.numel());
      if (cal.kind == Calibrator::kDelayed) o.history.push(m);
    };
    InterpreterOptions iopts;
    iopts.on_node = [&](const ir::Node& n, const std::vector<Tensor>& outs, double) {
      for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k)
        if (n.outputs[k] != ir::kNoValue) observe(g.value(n.outputs[k]).name, outs[k]);
    };
    int64_t used = 0;
    for (int64_t b = 0; b < batches; ++b) {
      std::vector<Tensor> in;
      const int64_t rows = std::min(batch, count - b * batch);
      used += rows;
      for (const Tensor& s : samples) {
        Shape sh = s.shape();
        sh[0] = rows;
        const size_t per = s.nbytes() / static_cast<size_t>(s.dim(0));
        in.push_back(s.view(per * static_cast<size_t>(b * batch), s.dtype(), sh));
      }
      for (size_t k = 0; k < in.size(); ++k) observe(g.value(g.inputs[k]).name, in[k]);
      auto r = interpret(g, in, nullptr, iopts);
      if (!r.ok()) return r.status().with_context("calibration batch " + std::to_string(b));
      if (config.progress) config.progress(static_cast<int>(b + 1), static_cast<int>(batches));
    }
    rep.batches = static_cast<int>(batches);
    rep.samples = static_cast<int>(used);
    for (auto& [name, o] : seen) {
      const double qmax = qmax_for(name);
      if (!o.seen) return internal_error("calibration: tensor '" + name + "' was never computed");
      double amax = o.max_abs;
      double scale = 0;
      switch (cal.kind) {
        case Calibrator::kMinMax: break;
        case Calibrator::kEntropy: {
          auto a = quant::entropy_amax(o.hist);
          if (a.ok()) amax = *a;
          break;
        }
        case Calibrator::kPercentile: {
          auto a = quant::percentile_amax(o.hist, cal.percentile);
          if (a.ok()) amax = *a;
          break;
        }
        case Calibrator::kMse: {
          auto a = quant::mse_amax(o.hist, static_cast<int>(qmax));
          if (a.ok()) amax = *a;
          break;
        }
        case Calibrator::kDelayed:
          amax = o.history.reduce(cal.delayed.algo) * std::ldexp(1.0, cal.delayed.margin);
          break;
      }
      scale = amax > 0 && std::isfinite(amax) ? amax / qmax : 1.0;
      scales[name] = static_cast<float>(scale);
    }
    if (!config.cache.empty()) {
      quant::CalibrationCache c;
      c.model_hash = model_hash;
      c.format = quant_format_name(config.format);
      c.calibrator = cal.spec;
      c.e5m2 = e5m2_spec;
      c.samples = rep.samples;
      c.scales = scales;
      KILN_RETURN_IF_ERROR(quant::write_calibration_cache(config.cache, c));
    }
  }
  rep.activation_scales = scales;

  // 3. Rewrite the ModelProto.
  std::set<std::string> names;
  for (const auto& n : gp->node())
    for (const auto& s : n.output()) names.insert(s);
  for (const auto& n : gp->node()) names.insert(n.name());
  for (const auto& i : gp->input()) names.insert(i.name());
  for (const auto& i : gp->initializer()) names.insert(i.name());
  const int q_type = fp8 ? 17 /* FLOAT8E4M3FN */ : onnx::TensorProto::INT8;
  const uint8_t zero_byte = 0;  // int8 0 and E4M3FN +0 are both the byte 0

  std::map<int, std::vector<onnx::NodeProto>> before;
  std::map<std::string, std::string> act_dq;     // activation -> its DQ output
  std::map<std::string, std::string> weight_dq;  // weight initializer -> its DQ output
  std::set<std::string> quantized_weights;
  std::vector<onnx::TensorProto> new_inits;
  // Per-tensor weight scales (QuantizeConfig::per_tensor_weights): the amax over every linear
  // target's weight of one activation, so the layers reading it (Q/K/V) share one scale.
  std::map<std::string, double> group_amax;  // activation -> max |W| of its linear targets
  if (config.per_tensor_weights)
    for (const Target& t : targets) {
      if (!t.linear) continue;
      KILN_ASSIGN_OR_RETURN(Tensor w, onnx_import::tensor_from_proto(*constant_proto(t.weight), base_dir));
      double m = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        const float v = w.data<float>()[i];
        if (std::isfinite(v)) m = std::max(m, static_cast<double>(std::fabs(v)));
      }
      double& g = group_amax[t.activation];
      g = std::max(g, m);
    }
  for (const Target& t : targets) {
    std::vector<onnx::NodeProto>& ins = before[t.node];
    if (!act_dq.count(t.activation)) {
      const float s = scales.at(t.activation);
      const std::string sn = unique_name(names, t.activation + "_scale");
      const std::string zn = unique_name(names, t.activation + "_zero_point");
      const std::string qn = unique_name(names, t.activation + "_quantized");
      const std::string dn = unique_name(names, t.activation + "_dequantized");
      onnx::TensorProto st, zt;
      set_raw(&st, sn, onnx::TensorProto::FLOAT, {}, &s, sizeof s);
      set_raw(&zt, zn, e5m2_acts.count(t.activation) ? 19 /* FLOAT8E5M2 */ : q_type, {}, &zero_byte, 1);
      new_inits.push_back(st);
      new_inits.push_back(zt);
      onnx::NodeProto q;
      q.set_op_type("QuantizeLinear");
      q.set_name(unique_name(names, t.activation + "/QuantizeLinear"));
      q.add_input(t.activation);
      q.add_input(sn);
      q.add_input(zn);
      q.add_output(qn);
      onnx::NodeProto d;
      d.set_op_type("DequantizeLinear");
      d.set_name(unique_name(names, t.activation + "/DequantizeLinear"));
      d.add_input(qn);
      d.add_input(sn);
      d.add_input(zn);
      d.add_output(dn);
      ins.push_back(q);
      ins.push_back(d);
      act_dq[t.activation] = dn;
    }
    if (!weight_dq.count(t.weight)) {
      KILN_ASSIGN_OR_RETURN(Tensor w, onnx_import::tensor_from_proto(*constant_proto(t.weight), base_dir));
      const Shape& ws = w.shape();
      const bool w_axis = per_axis && !(config.per_tensor_weights && t.linear);
      const int64_t channels = w_axis ? ws[t.weight_axis] : 1;
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < t.weight_axis; ++d) outer *= ws[d];
      for (size_t d = t.weight_axis + 1; d < ws.size(); ++d) inner *= ws[d];
      if (!w_axis) {
        outer = 1;
        inner = w.numel();
      }
      const float* wv = w.data<float>();
      const double qmax = qmax_of(config.format);
      std::vector<float> ch_scale(static_cast<size_t>(channels));
      for (int64_t c = 0; c < channels; ++c) {
        double m = 0;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            const float v = wv[(o * channels + c) * inner + i];
            if (std::isfinite(v)) m = std::max(m, static_cast<double>(std::fabs(v)));
          }
        if (config.per_tensor_weights && t.linear) m = std::max(m, group_amax[t.activation]);
        ch_scale[c] = m > 0 ? static_cast<float>(m / qmax) : 1.0f;
      }
      std::vector<uint8_t> q(static_cast<size_t>(w.numel()));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t i = 0; i < inner; ++i) {
            const int64_t k = (o * channels + c) * inner + i;
            const float x = wv[k] / ch_scale[c];
            if (fp8) {
              q[k] = float_to_fp8e4m3fn(x, true);
            } else {
              const float r = std::clamp(std::nearbyint(x), -128.0f, 127.0f);
              q[k] = static_cast<uint8_t>(static_cast<int8_t>(r));
            }
          }
      const std::string qn = unique_name(names, t.weight + "_quantized");
      const std::string sn = unique_name(names, t.weight + "_scale");
      const std::string zn = unique_name(names, t.weight + "_zero_point");
      const std::string dn = unique_name(names, t.weight + "_dequantized");
      onnx::TensorProto qt, st, zt;
      set_raw(&qt, qn, q_type, ws, q.data(), q.size());
      const Shape sshape = w_axis ? Shape{channels} : Shape{};
      set_raw(&st, sn, onnx::TensorProto::FLOAT, sshape, ch_scale.data(), ch_scale.size() * sizeof(float));
      std::vector<uint8_t> zeros(static_cast<size_t>(channels), 0);
      set_raw(&zt, zn, q_type, sshape, zeros.data(), zeros.size());
      new_inits.push_back(qt);
      new_inits.push_back(st);
      new_inits.push_back(zt);
      onnx::NodeProto d;
      d.set_op_type("DequantizeLinear");
      d.set_name(unique_name(names, t.weight + "/DequantizeLinear"));
      d.add_input(qn);
      d.add_input(sn);
      d.add_input(zn);
      d.add_output(dn);
      if (w_axis) {
        auto* a = d.add_attribute();
        a->set_name("axis");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(t.weight_axis);
      }
      ins.push_back(d);
      weight_dq[t.weight] = dn;
      quantized_weights.insert(t.weight);
    }
  }
  // The new node list: the Q/DQ nodes right before the first target that reads them.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < gp->node_size(); ++i) {
    auto it = before.find(i);
    if (it != before.end())
      for (onnx::NodeProto& n : it->second) *nodes.Add() = std::move(n);
    onnx::NodeProto n = gp->node(i);
    for (const Target& t : targets)
      if (t.node == i) {
        n.set_input(t.act_input, act_dq.at(t.activation));
        n.set_input(t.weight_input, weight_dq.at(t.weight));
        rep.quantized.push_back(n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name());
      }
    *nodes.Add() = std::move(n);
  }
  gp->mutable_node()->Swap(&nodes);
  // Drop the float weights nothing reads any more (subgraphs and outputs included).
  std::set<std::string> still_read;
  std::function<void(const onnx::GraphProto&)> collect = [&](const onnx::GraphProto& sg) {
    for (const auto& n : sg.node()) {
      for (const auto& s : n.input()) still_read.insert(s);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) collect(a.g());
        for (const auto& gg : a.graphs()) collect(gg);
      }
    }
    for (const auto& o : sg.output()) still_read.insert(o.name());
  };
  collect(*gp);
  google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
  for (int i = 0; i < gp->initializer_size(); ++i) {
    onnx::TensorProto& t = *gp->mutable_initializer(i);
    if (quantized_weights.count(t.name()) && !still_read.count(t.name())) continue;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {  // inline: the output may live elsewhere
      KILN_ASSIGN_OR_RETURN(Tensor v, onnx_import::tensor_from_proto(t, base_dir));
      const std::string nm = t.name();
      const int type = t.data_type();
      set_raw(&t, nm, type, v.shape(), v.raw(), v.nbytes());
    }
    *inits.Add() = std::move(t);
  }
  for (onnx::TensorProto& t : new_inits) *inits.Add() = std::move(t);
  gp->mutable_initializer()->Swap(&inits);
  // Constant nodes that held a quantized weight nothing reads any more.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (auto& n : *gp->mutable_node()) {
    if (n.op_type() == "Constant" && n.output_size() == 1 && quantized_weights.count(n.output(0)) &&
        !still_read.count(n.output(0)))
      continue;
    *kept.Add() = std::move(n);
  }
  gp->mutable_node()->Swap(&kept);
  // Graph inputs that named a dropped initializer (IR < 4 models list initializers as inputs).
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
  for (const auto& in : gp->input())
    if (!(quantized_weights.count(in.name()) && !still_read.count(in.name()))) *inputs.Add() = in;
  gp->mutable_input()->Swap(&inputs);
  if (fp8 && model.ir_version() < 9) model.set_ir_version(9);  // FLOAT8 types need IR 9

  std::string out;
  if (model.ByteSizeLong() > (2ull << 30) - 1 || !model.SerializeToString(&out))
    return unsupported("quantize: the quantized model is larger than protobuf's 2 GB limit");
  return out;
}

}  // namespace kiln
