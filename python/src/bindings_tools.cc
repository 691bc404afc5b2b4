// The CLI's measurements for Python, computed by the same functions as `kiln inspect / compare /
// bench` (tools/kiln): engine_json, compare_engine, bench_engine, prepare_inputs. Results are the
// commands' --json objects as dicts.
#include <pybind11/stl.h>

#include <map>
#include <string>

#include "common.h"
#include "kiln/quantize.h"
#include "onnx/importer.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/tensors.h"

namespace kiln::py {
namespace {

// Inputs in engine order: the caller's arrays, the rest generated as the CLI does (seeded).
std::vector<std::pair<std::string, Tensor>> engine_inputs(const Engine& engine, const pyb::dict& arrays,
                                                          std::map<std::string, Shape>* shapes, uint64_t seed) {
  std::map<std::string, Tensor> given;
  for (const auto& [k, v] : arrays) {
    const std::string name = pyb::cast<std::string>(k);
    if (!engine.find_io(name) || !engine.find_io(name)->is_input)
      throw StatusError{not_found("'" + name + "' is not an input of the engine")};
    Tensor t = tensor_from_numpy(pyb::array::ensure(v), "input '" + name + "'");
    (*shapes)[name] = t.shape();
    given[name] = std::move(t);
  }
  auto inputs = unwrap(cli::prepare_inputs(engine, {}, *shapes, seed));
  for (auto& [name, t] : inputs)
    if (given.count(name)) t = given[name];
  return inputs;
}

}  // namespace

void init_tools(pyb::module_& m) {
  m.def(
      "quantize_onnx",
      [](const std::string& model, const std::string& format, const std::string& data, const std::string& cache,
         const std::string& calibrator, int batch_size, int max_batches, const std::vector<std::string>& exclude,
         double max_error, double calib_split, const std::string& weight_scales) {
        QuantizeConfig c;
        if (weight_scales != "per-channel" && weight_scales != "per-tensor")
          throw StatusError{invalid_argument("weight_scales '" + weight_scales + "': expected per-channel or per-tensor")};
        c.per_tensor_weights = weight_scales == "per-tensor";
        if (format == "int8") c.format = QuantFormat::kInt8;
        else if (format == "fp8") c.format = QuantFormat::kFp8E4M3;
        else throw StatusError{invalid_argument("format '" + format + "': expected int8 or fp8")};
        c.data = data;
        c.cache = cache;
        c.calibrator = calibrator;
        c.batch_size = batch_size;
        c.max_batches = max_batches;
        c.exclude = exclude;
        c.max_error = max_error;
        c.calib_split = calib_split;
        QuantizeReport rep;
        std::string bytes;
        {
          pyb::gil_scoped_release release;
          bytes = unwrap(quantize_onnx(model, c, &rep));
        }
        pyb::dict r;
        r["calibrator"] = rep.calibrator;
        r["from_cache"] = rep.from_cache;
        r["batches"] = rep.batches;
        r["samples"] = rep.samples;
        r["quantized"] = rep.quantized;
        r["skipped"] = rep.skipped;
        r["activation_scales"] = rep.activation_scales;
        if (rep.error_all_quantized >= 0) {
          r["error_all_quantized"] = rep.error_all_quantized;
          r["error"] = rep.error;
          r["held_out_samples"] = rep.held_out_samples;
          pyb::list layers;
          for (const LayerChoice& l : rep.layers) {
            pyb::dict d;
            d["node"] = l.node;
            d["quantized"] = l.quantized;
            d["sensitivity"] = l.sensitivity;
            layers.append(d);
          }
          r["layers"] = layers;
          r["summary"] = describe_budget(rep, c);
        }
        return pyb::make_tuple(pyb::bytes(bytes), r);
      },
      pyb::arg("model"), pyb::arg("format") = "int8", pyb::arg("data") = "", pyb::arg("cache") = "",
      pyb::arg("calibrator") = "", pyb::arg("batch_size") = 0, pyb::arg("max_batches") = 0,
      pyb::arg("exclude") = std::vector<std::string>{}, pyb::arg("max_error") = 0.0, pyb::arg("calib_split") = 0.8,
      pyb::arg("weight_scales") = "per-channel",
      "kiln::quantize_onnx (kiln/quantize.h): (Q/DQ ONNX bytes, report dict). The GIL is released while it runs.");

  m.def("inspect", [](const Engine& e) { return to_python(cli::engine_json(e)); }, pyb::arg("engine"),
        "`kiln inspect --json` of an engine as a dict (header, build flags, inputs, outputs, profiles, layers, "
        "weights, device layers and memory).");

  m.def("prepare_inputs", [](const Engine& e, const std::map<std::string, Shape>& shapes, uint64_t seed) {
    std::map<std::string, Shape> s = shapes;
    pyb::dict out;
    for (const auto& [name, t] : engine_inputs(e, pyb::dict(), &s, seed)) out[pyb::str(name)] = to_numpy(t);
    return out;
  }, pyb::arg("engine"), pyb::arg("shapes") = std::map<std::string, Shape>{}, pyb::arg("seed") = 1,
        "The inputs `kiln run` / `kiln compare` generate (same seed, same values) as {name: numpy array}.");

  m.def("load_tensor", [](const std::string& path) { return to_numpy(unwrap(cli::load_tensor_file(path))); },
        pyb::arg("path"), "A .npy file or an ONNX TensorProto (.pb) as a numpy array.");

  m.def("compare", [](const Engine& e, const std::string& model, const pyb::dict& inputs,
                      const std::map<std::string, Shape>& shapes, uint64_t seed, int top_k, double atol, double rtol) {
    std::map<std::string, Shape> s = shapes;
    auto in = engine_inputs(e, inputs, &s, seed);
    StatusOr<nlohmann::json> j = [&]() -> StatusOr<nlohmann::json> {
      pyb::gil_scoped_release nogil;
      KILN_ASSIGN_OR_RETURN(ir::Graph reference, onnx_import::import_model_file(model));
      return cli::compare_engine(e, reference, in, s, top_k, atol, rtol);
    }();
    return to_python(unwrap(std::move(j)));
  }, pyb::arg("engine"), pyb::arg("model"), pyb::arg("inputs") = pyb::dict(),
        pyb::arg("shapes") = std::map<std::string, Shape>{}, pyb::arg("seed") = 1, pyb::arg("top_k") = 5,
        pyb::arg("atol") = 1e-5, pyb::arg("rtol") = 1e-3,
        "`kiln compare`: the engine against the CPU reference interpreter on the ONNX model, same inputs.");

  m.def("bench", [](const Engine& e, const std::map<std::string, Shape>& shapes, int warmup, int iterations,
                    double duration_s, bool cuda_graph, int streams, const std::string& dump_profile) {
    cli::BenchOptions o;
    o.warmup = warmup;
    o.iterations = iterations;
    o.duration_s = duration_s;
    o.cuda_graph = cuda_graph;
    o.streams = streams;
    o.dump_profile = dump_profile;
    check(o.validate());
    nlohmann::json j;
    int rc;
    {
      pyb::gil_scoped_release nogil;
      rc = cli::bench_engine(o, e, shapes, &j);
    }
    if (rc != cli::kExitOk) {
      const Status& s = cli::last_reported_error();
      throw StatusError{s.ok() ? internal_error("kiln bench failed (exit code " + std::to_string(rc) + ")") : s};
    }
    return to_python(j);
  }, pyb::arg("engine"), pyb::arg("shapes") = std::map<std::string, Shape>{}, pyb::arg("warmup") = 10,
        pyb::arg("iterations") = 100, pyb::arg("duration_s") = 0.0, pyb::arg("cuda_graph") = false,
        pyb::arg("streams") = 1, pyb::arg("dump_profile") = "",
        "`kiln bench` of a loaded engine: prints the CLI's summary and returns its --json object.");
}

}  // namespace kiln::py
