// Bindings of kiln/builder.h: OptimizationProfile, BuilderConfig (precisions, layer precisions,
// workspace, aux streams, timing cache, profiles, passes, progress), the imported ONNX graph
// (Network: what TensorRT's INetworkDefinition + OnnxParser hold) and Builder. The GIL is
// released while a plan is built; the progress callback takes it back for each report.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>

#include "common.h"
#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/plan.h"
#include "builder/build_from_graph.h"
#include "onnx/importer.h"
#include "tools/kiln/dynamic_dims.h"

namespace kiln::py {
namespace {

// An imported ONNX model, ready to build (empty until parse / parse_from_file succeeds).
struct Network {
  std::shared_ptr<ir::Graph> graph;
};

TensorDesc value_desc(const ir::Graph& g, ir::ValueId id) {
  const ir::Value& v = g.value(id);
  TensorDesc d;
  d.name = v.name;
  d.dtype = v.dtype;
  d.rank_known = v.shape.has_value();
  if (v.shape)
    for (const ir::Dim& dim : *v.shape) {
      d.dims.push_back(dim.value);
      d.symbols.push_back(dim.symbol);
    }
  return d;
}

const ir::Graph& parsed(const Network& n) {
  if (!n.graph) throw StatusError{invalid_argument("the network is empty: parse an ONNX model into it first")};
  return *n.graph;
}

pyb::bytes plan_bytes(StatusOr<std::vector<uint8_t>>&& plan) {
  std::vector<uint8_t> p = unwrap(std::move(plan));
  return pyb::bytes(reinterpret_cast<const char*>(p.data()), p.size());
}

// Holds a Python callable for std::function; dropped under the GIL whichever thread drops it.
std::shared_ptr<pyb::object> keep(pyb::object f) {
  return std::shared_ptr<pyb::object>(new pyb::object(std::move(f)), [](pyb::object* o) {
    pyb::gil_scoped_acquire gil;
    delete o;
  });
}

}  // namespace

Logger make_logger(pyb::object f) {
  if (f.is_none()) return nullptr;
  auto fn = keep(std::move(f));
  return [fn](LogSeverity severity, const std::string& message) {
    pyb::gil_scoped_acquire gil;
    try {
      (*fn)(severity, message);
    } catch (pyb::error_already_set& e) {
      e.discard_as_unraisable("kiln logger callback");
    }
  };
}

void init_builder(pyb::module_& m) {
  pyb::enum_<LogSeverity>(m, "LogSeverity", "Severity of a library message (TensorRT's ILogger.Severity).")
      .value("error", LogSeverity::kError)
      .value("warning", LogSeverity::kWarning)
      .value("info", LogSeverity::kInfo)
      .value("verbose", LogSeverity::kVerbose);

  pyb::class_<TensorDesc>(m, "TensorDesc", "An input or output as a plan (or a parsed model) describes it.")
      .def_readonly("name", &TensorDesc::name)
      .def_readonly("dtype", &TensorDesc::dtype)
      .def_readonly("rank_known", &TensorDesc::rank_known)
      .def_property_readonly("shape", [](const TensorDesc& d) { return pyb::tuple(pyb::cast(d.dims)); },
                             "Dims as a tuple; -1 for a dynamic dim.")
      .def_readonly("symbols", &TensorDesc::symbols, "Per dim: the model's symbol ('batch') or ''.")
      .def("shape_string", &TensorDesc::shape_string, "'[batch,3,224,224]'; '?' when the rank is unknown.")
      .def("__repr__", [](const TensorDesc& d) {
        return "<TensorDesc " + d.name + " " + dtype_name(d.dtype) + " " + d.shape_string() + ">";
      });

  pyb::class_<ShapeRange>(m, "ShapeRange", "min / opt / max shapes of one input (TensorRT's kMIN/kOPT/kMAX).")
      .def_readonly("min", &ShapeRange::min)
      .def_readonly("opt", &ShapeRange::opt)
      .def_readonly("max", &ShapeRange::max)
      .def("contains", &ShapeRange::contains, "Same rank and min <= shape <= max per dim.")
      .def("__repr__", [](const ShapeRange& r) {
        return "<ShapeRange " + shape_str(r.min) + ".." + shape_str(r.max) + " opt " + shape_str(r.opt) + ">";
      });

  pyb::class_<OptimizationProfile>(m, "OptimizationProfile",
                                   "Shape ranges of the dynamic inputs; memory is sized for max, tactics tuned at opt.")
      .def(pyb::init<>())
      .def("set_shape", [](OptimizationProfile& p, const std::string& name, const Shape& min, const Shape& opt,
                           const Shape& max) { check(p.set_dimensions(name, min, opt, max)); },
           pyb::arg("input"), pyb::arg("min"), pyb::arg("opt"), pyb::arg("max"),
           "Sets the range of input `input` (dims, elements). Raises InvalidArgumentError (naming the input and "
           "the dim) unless the ranks agree and 0 <= min <= opt <= max per dim.")
      .def("get_shape", [](const OptimizationProfile& p, const std::string& name) -> pyb::object {
        const ShapeRange* r = p.find(name);
        if (!r) return pyb::none();
        return pyb::make_tuple(r->min, r->opt, r->max);
      }, "(min, opt, max) of `input`, or None when the profile does not name it.")
      .def_property_readonly("ranges", &OptimizationProfile::ranges, "{input name: ShapeRange}")
      .def("__bool__", [](const OptimizationProfile& p) { return !p.empty(); });

  pyb::enum_<TargetDevice>(m, "TargetDevice")
      .value("cpu", TargetDevice::kCpu)
      .value("cuda", TargetDevice::kCuda)
      .value("auto", TargetDevice::kAuto);

  pyb::class_<LayerPrecision>(m, "LayerPrecision",
                              "Layers whose name (or fused ONNX node) matches `pattern` ('*' wildcard) compute in "
                              "`precision` (float32, float16 or bfloat16) on CUDA.")
      .def(pyb::init([](std::string pattern, DataType precision) { return LayerPrecision{std::move(pattern), precision}; }),
           pyb::arg("pattern"), pyb::arg("precision"))
      .def_readwrite("pattern", &LayerPrecision::pattern)
      .def_readwrite("precision", &LayerPrecision::precision);

  pyb::class_<BuildProgress>(m, "BuildProgress", "One step of a build, passed to BuilderConfig.progress.")
      .def_readonly("step", &BuildProgress::step, "'import', 'profiles', 'verify', 'passes', 'tactics', 'tuning', ...")
      .def_readonly("done", &BuildProgress::done)
      .def_readonly("total", &BuildProgress::total, "0: unknown")
      .def_readonly("detail", &BuildProgress::detail)
      .def("__repr__", [](const BuildProgress& p) {
        return "<BuildProgress " + p.step + " " + std::to_string(p.done) + "/" + std::to_string(p.total) + ">";
      });

  pyb::class_<BuilderConfig>(m, "BuilderConfig", "How to build a plan (TensorRT's IBuilderConfig).")
      .def(pyb::init<>())
      .def_readwrite("fp16", &BuilderConfig::fp16, "Allow float16 layers (CUDA).")
      .def_readwrite("bf16", &BuilderConfig::bf16, "Allow bfloat16 layers (CUDA).")
      .def_readwrite("tf32", &BuilderConfig::tf32, "TF32 tensor-core math for fp32 GEMM/conv on CUDA (default on).")
      .def_readwrite("fp8", &BuilderConfig::fp8, "FP8 layers from the network's Q/DQ nodes (kiln.quantize writes them); refused for a network without.")
      .def_readwrite("int8", &BuilderConfig::int8, "INT8 layers from the network's Q/DQ nodes (kiln.quantize writes them); refused for a network without.")
      .def_readwrite("workspace_limit", &BuilderConfig::workspace_limit, "Bytes of scratch one layer may use; 0 = none.")
      .def_readwrite("max_aux_streams", &BuilderConfig::max_aux_streams,
                     "CUDA aux streams for independent branches: -1 = the builder decides, 0 = none, at most 16.")
      .def_readwrite("timing_cache_path", &BuilderConfig::timing_cache_path,
                     "CUDA timing cache JSON read before tuning and rewritten after it ('' = none).")
      .def_readwrite("tactic_sources", &BuilderConfig::tactic_sources,
                     "CUDA tactic sources: '' = all of kiln, cudnn, cudnn_graph, cublaslt; '+src'/'-src' edits "
                     "('-cudnn_graph') or the names to use ('kiln,cublaslt').")
      .def_readwrite("output_types", &BuilderConfig::output_types,
                     "Dtypes of the float outputs (trtexec --outputIOFormats): '' = as declared; 'fp16' (fp32, fp16, "
                     "bf16) = every float output; 'fp16,,fp32' = one per output in order ('' = as declared).")
      .def_readwrite("tuning_budget", &BuilderConfig::tuning_budget,
                     "CUDA: most candidate tactics timed per layer and source; 0 = the defaults.")
      .def_readwrite("timing_iterations", &BuilderConfig::timing_iterations,
                     "CUDA: timed runs per candidate tactic after one warm-up (TensorRT's --avgTiming).")
      .def_readwrite("timing_cold_cache", &BuilderConfig::timing_cold_cache,
                     "CUDA: time candidate tactics with the L2 cache flushed before each run (default) or warm.")
      .def_readwrite("tuning_shapes", &BuilderConfig::tuning_shapes,
                     "CUDA, dynamic profiles: tune tactics at up to this many shapes besides opt (min, max, powers "
                     "of two between); other shapes run the nearest tuned set's tactics. 0 = opt only.")
      .def_property("logger", [](const BuilderConfig& c) { return static_cast<bool>(c.logger); },
                    [](BuilderConfig& c, pyb::object f) { c.logger = make_logger(std::move(f)); },
                    "A callable(severity: LogSeverity, message: str) for the build's messages (timing cache, "
                    "tactic summaries); None to drop them. Reading it gives whether one is set.")
      .def_readwrite("target", &BuilderConfig::target)
      .def_readwrite("opt_level", &BuilderConfig::opt_level, "0..3: 0 no rewrites, 1 cleanups, 2 + fusions.")
      .def_readwrite("disabled_passes", &BuilderConfig::disabled_passes, "Pass names to skip (a set; assign a new set).")
      .def_readwrite("dump_after_pass", &BuilderConfig::dump_after_pass)
      .def_readwrite("verify_passes", &BuilderConfig::verify_passes)
      .def_readwrite("quant_conv", &BuilderConfig::quant_conv)
      .def_property("profiles", [](const BuilderConfig& c) { return c.profiles; },
                    [](BuilderConfig& c, std::vector<OptimizationProfile> p) { c.profiles = std::move(p); },
                    "A copy of the profiles; assign a list, or use add_optimization_profile.")
      .def("add_optimization_profile", [](BuilderConfig& c, const OptimizationProfile& p) {
        c.profiles.push_back(p);
        return static_cast<int>(c.profiles.size()) - 1;
      }, "Appends a profile; returns its index.")
      .def_property("layer_precisions", [](const BuilderConfig& c) { return c.layer_precisions; },
                    [](BuilderConfig& c, std::vector<LayerPrecision> l) { c.layer_precisions = std::move(l); },
                    "Per-layer precision constraints, read left to right (a copy; assign a list).")
      .def("add_layer_precision", [](BuilderConfig& c, const std::string& pattern, DataType precision) {
        c.layer_precisions.push_back({pattern, precision});
      }, pyb::arg("pattern"), pyb::arg("precision"))
      .def_property("progress", [](const BuilderConfig& c) { return static_cast<bool>(c.progress); },
                    [](BuilderConfig& c, pyb::object f) {
                      if (f.is_none()) {
                        c.progress = nullptr;
                        return;
                      }
                      auto fn = keep(std::move(f));
                      c.progress = [fn](const BuildProgress& p) {
                        pyb::gil_scoped_acquire gil;
                        try {
                          (*fn)(p);
                        } catch (pyb::error_already_set& e) {
                          e.discard_as_unraisable("kiln build progress callback");
                        }
                      };
                    },
                    "A callable(BuildProgress) called during build (from the building thread, GIL held); None to "
                    "clear. Reading it gives whether one is set. Exceptions it raises are reported, not propagated.");

  pyb::class_<Network>(m, "Network", "An ONNX model imported into Kiln's graph (empty until parsed).")
      .def(pyb::init<>())
      .def("parse", [](Network& n, const pyb::bytes& model, const std::string& base_dir) {
        std::string bytes = model;
        StatusOr<ir::Graph> g = [&] {
          pyb::gil_scoped_release nogil;
          return onnx_import::import_model_bytes(bytes, base_dir);
        }();
        n.graph = std::make_shared<ir::Graph>(unwrap(std::move(g)));
      }, pyb::arg("model"), pyb::arg("base_dir") = ".",
           "Imports a serialized ModelProto (external data relative to base_dir). Raises UnsupportedError (e.nodes: "
           "every unsupported node), InvalidModelError.")
      .def("parse_from_file", [](Network& n, const std::string& path) {
        StatusOr<ir::Graph> g = [&] {
          pyb::gil_scoped_release nogil;
          return onnx_import::import_model_file(path);
        }();
        n.graph = std::make_shared<ir::Graph>(unwrap(std::move(g)));
      }, pyb::arg("path"), "Imports an ONNX file. Raises NotFoundError, UnsupportedError, InvalidModelError.")
      .def_property_readonly("parsed", [](const Network& n) { return static_cast<bool>(n.graph); })
      .def_property_readonly("inputs", [](const Network& n) {
        const ir::Graph& g = parsed(n);
        std::vector<TensorDesc> d;
        for (ir::ValueId v : g.inputs) d.push_back(value_desc(g, v));
        return d;
      }, "The model's runtime inputs (initializers excluded), dims -1 where dynamic.")
      .def_property_readonly("outputs", [](const Network& n) {
        const ir::Graph& g = parsed(n);
        std::vector<TensorDesc> d;
        for (ir::ValueId v : g.outputs) d.push_back(value_desc(g, v));
        return d;
      })
      .def_property_readonly("num_nodes", [](const Network& n) { return parsed(n).nodes.size(); });

  pyb::class_<Builder>(m, "Builder", "Builds serialized plans (TensorRT's IBuilder).")
      .def_static("build", [](const std::string& onnx_path, const BuilderConfig& config) {
        StatusOr<std::vector<uint8_t>> plan = [&] {
          pyb::gil_scoped_release nogil;
          return Builder::build(onnx_path, config);
        }();
        return plan_bytes(std::move(plan));
      }, pyb::arg("onnx_path"), pyb::arg("config"),
                  "Imports and builds; returns the plan bytes. GIL released. Raises KilnError subclasses.")
      .def_static("build_network", [](const Network& network, const BuilderConfig& config) {
        const ir::Graph& g = parsed(network);
        StatusOr<std::vector<uint8_t>> plan = [&] {
          pyb::gil_scoped_release nogil;
          return build_from_graph(g, config);
        }();
        return plan_bytes(std::move(plan));
      }, pyb::arg("network"), pyb::arg("config"), "Builds a parsed Network; returns the plan bytes. GIL released.");

  m.def("fill_dynamic_dims", [](const Network& network, BuilderConfig& config) {
    return cli::fill_dynamic_dims(parsed(network), &config);
  }, pyb::arg("network"), pyb::arg("config"),
        "trtexec's habit (as `kiln build`): each input with dynamic dims that no profile names gets 1 for each "
        "dynamic dim in every profile; returns one warning line per such input.");
}

}  // namespace kiln::py
