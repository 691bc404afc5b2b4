// Bindings of kiln/runtime.h: Runtime -> Engine (io tensors, profiles, layers, device layers and
// memory, load phases) -> ExecutionContext (host execute on numpy arrays; set_tensor_address /
// enqueue on device addresses and a cudaStream_t passed as integers; CUDA graphs; per-layer
// profiling). Lifetimes: an Engine is shared (shared_ptr): it outlives the Runtime call that made
// it, and every context keeps its engine alive. The GIL is released while a plan is
// deserialized and while a context runs.
#include <pybind11/stl.h>

#include <memory>

#include "common.h"
#include "cuda_graphs.h"
#include "kiln/runtime.h"

namespace kiln::py {
namespace {

// A context plus what Python needs beside it: its engine (for attribute access) and the CUDA
// graphs captured from its enqueue.
struct Context {
  std::shared_ptr<const Engine> engine;
  std::unique_ptr<ExecutionContext> ctx;
  GraphCache graphs;
};

// ExecutionContext::enqueue on `stream` (a cudaStream_t as an integer) with the GIL released.
void enqueue_released(Context& c, uintptr_t stream) {
  Status s;
  {
    pyb::gil_scoped_release nogil;
    s = c.ctx->enqueue(reinterpret_cast<CudaStream>(stream));
  }
  check(s);
}

std::shared_ptr<Engine> deserialize(const pyb::buffer& plan, pyb::object logger) {
  pyb::buffer_info info = plan.request();
  if (info.ndim != 1 || info.itemsize != 1 || info.strides[0] != 1)
    throw StatusError{invalid_argument("a plan is a contiguous bytes-like object (bytes, bytearray, memoryview, 1-D uint8 array)")};
  const auto* data = static_cast<const uint8_t*>(info.ptr);
  const size_t size = static_cast<size_t>(info.size * info.itemsize);
  const Logger log = make_logger(std::move(logger));
  StatusOr<std::shared_ptr<Engine>> e = [&] {
    pyb::gil_scoped_release nogil;
    return Runtime::deserialize_engine(data, size, log);
  }();
  return unwrap(std::move(e));
}

void* as_pointer(uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

void init_runtime(pyb::module_& m) {
  pyb::class_<PlanTarget>(m, "PlanTarget")
      .def_property_readonly("backend", [](const PlanTarget& t) { return t.backend == PlanBackend::kCuda ? "cuda" : "cpu"; })
      .def_readonly("cc_major", &PlanTarget::cc_major)
      .def_readonly("cc_minor", &PlanTarget::cc_minor)
      .def_readonly("cudnn_version", &PlanTarget::cudnn_version)
      .def_readonly("cublaslt_version", &PlanTarget::cublaslt_version)
      .def("__str__", &PlanTarget::to_string);

  pyb::class_<PlanHeader>(m, "PlanHeader")
      .def_readonly("format_version", &PlanHeader::format_version)
      .def_readonly("kiln_version", &PlanHeader::kiln_version)
      .def_readonly("target", &PlanHeader::target)
      .def_readonly("file_bytes", &PlanHeader::file_bytes)
      .def_readonly("checksum", &PlanHeader::checksum);

  pyb::class_<IOTensor>(m, "IOTensor", "An input or output of an engine.")
      .def_property_readonly("name", [](const IOTensor& t) { return t.desc.name; })
      .def_property_readonly("dtype", [](const IOTensor& t) { return t.desc.dtype; })
      .def_property_readonly("shape", [](const IOTensor& t) { return pyb::tuple(pyb::cast(t.desc.dims)); },
                             "Dims; -1 where dynamic (set the shape on a context).")
      .def_property_readonly("desc", [](const IOTensor& t) { return t.desc; })
      .def_readonly("is_input", &IOTensor::is_input)
      .def("__repr__", [](const IOTensor& t) {
        return std::string("<IOTensor ") + (t.is_input ? "input " : "output ") + t.desc.name + " " +
               dtype_name(t.desc.dtype) + " " + t.desc.shape_string() + ">";
      });

  pyb::class_<LayerInfo>(m, "LayerInfo", "One layer of the plan, as `kiln inspect` lists it.")
      .def_readonly("name", &LayerInfo::name)
      .def_readonly("op", &LayerInfo::op)
      .def_readonly("origin", &LayerInfo::origin, "ONNX nodes the layer absorbed (itself first).")
      .def_readonly("inputs", &LayerInfo::inputs)
      .def_readonly("outputs", &LayerInfo::outputs)
      .def_readonly("tactic", &LayerInfo::tactic)
      .def_readonly("precision", &LayerInfo::precision,
                    "The layer's decided precision ('fp32', 'fp16', 'bf16'; the CPU computes in float32).")
      .def_readonly("precision_constrained", &LayerInfo::precision_constrained,
                    "True when a layer-precision rule decided it.")
      .def_readonly("tactic_id", &LayerInfo::tactic_id, "Stable tactic id (source << 24 | variant); 0xFFFFFFFF: none.")
      .def_readonly("tuned_ms", &LayerInfo::tuned_ms, "The tactic's time measured at build, ms (0: not timed).")
      .def_readonly("quantization", &LayerInfo::quantization,
                    "An 8-bit layer's activation and weight scales ('' for float layers), as `kiln inspect` prints them.")
      .def("__repr__", [](const LayerInfo& l) { return "<LayerInfo " + l.name + " (" + l.op + ") " + l.tactic + ">"; });

  pyb::class_<DeviceLayerInfo>(m, "DeviceLayerInfo", "A layer as a CUDA engine runs it (reformats included).")
      .def_readonly("name", &DeviceLayerInfo::name)
      .def_readonly("op", &DeviceLayerInfo::op)
      .def_readonly("tactic", &DeviceLayerInfo::tactic)
      .def_readonly("tactic_id", &DeviceLayerInfo::tactic_id)
      .def_readonly("tuned_ms", &DeviceLayerInfo::tuned_ms, "Time of the chosen tactic at build, ms (0: not timed).")
      .def_readonly("fallback", &DeviceLayerInfo::fallback)
      .def_readonly("workspace_bytes", &DeviceLayerInfo::workspace_bytes)
      .def_readonly("stream", &DeviceLayerInfo::stream, "0 = the caller's stream, 1.. = an aux stream.");

  pyb::class_<DeviceMemoryInfo>(m, "DeviceMemoryInfo", "Device memory of a CUDA engine at the opt shapes, bytes.")
      .def_readonly("arena_bytes", &DeviceMemoryInfo::arena_bytes)
      .def_readonly("activation_bytes_sum", &DeviceMemoryInfo::activation_bytes_sum)
      .def_readonly("weight_bytes", &DeviceMemoryInfo::weight_bytes)
      .def_readonly("workspace_bytes", &DeviceMemoryInfo::workspace_bytes)
      .def_readonly("aux_streams", &DeviceMemoryInfo::aux_streams);

  pyb::class_<LayerTiming>(m, "LayerTiming", "Time of one layer in the last profiled execute, ms.")
      .def_readonly("name", &LayerTiming::name)
      .def_readonly("op", &LayerTiming::op)
      .def_readonly("tactic", &LayerTiming::tactic)
      .def_readonly("ms", &LayerTiming::ms);

  pyb::class_<Engine, std::shared_ptr<Engine>>(m, "Engine", "A loaded plan (TensorRT's ICudaEngine); immutable, shared.")
      .def_property_readonly("header", &Engine::header)
      .def_property_readonly("io_tensors", &Engine::io_tensors, "Inputs first (model order), then outputs.")
      .def("find_io", [](const Engine& e, const std::string& name) -> pyb::object {
        const IOTensor* io = e.find_io(name);
        return io ? pyb::cast(*io) : pyb::none();
      })
      .def_property_readonly("profiles", &Engine::profiles)
      .def_property_readonly("layers", &Engine::layers)
      .def_property_readonly("weights_bytes", &Engine::weights_bytes)
      .def_property_readonly("fp16", &Engine::fp16)
      .def_property_readonly("bf16", &Engine::bf16)
      .def_property_readonly("tf32", &Engine::tf32)
      .def_property_readonly("fp8", &Engine::fp8)
      .def_property_readonly("int8", &Engine::int8)
      .def_property_readonly("opt_level", &Engine::opt_level)
      .def_property_readonly("workspace_limit", &Engine::workspace_limit)
      .def_property_readonly("max_aux_streams", &Engine::max_aux_streams)
      .def_property_readonly("device_layers", &Engine::device_layers)
      .def_property_readonly("device_memory", &Engine::device_memory)
      .def_property_readonly("load_phases", [](const Engine& e) {
        pyb::dict d;
        for (const auto& p : e.load_phases()) d[pyb::str(p.name)] = p.ms;
        return d;
      }, "{phase: ms} in load order: read, parse, device, shapes, lower, weights, tactics.")
      .def_property_readonly("tactics_restored", &Engine::tactics_restored)
      .def_property_readonly("tactics_rebuilt", &Engine::tactics_rebuilt)
      .def_property_readonly("weights_uploaded_packed", &Engine::weights_uploaded_packed,
                             "CUDA: weights uploaded as the plan stores them (packed for their tactics).")
      .def_property_readonly("tuned_shapes", &Engine::tuned_shapes,
                             "CUDA: the input shapes (one list per set, graph input order) tactics were tuned at.")
      .def("shape_setup_ms", &Engine::shape_setup_ms,
           "CUDA: [(shapes, ms)] the first use of each non-opt input-shape set took, in order.")
      .def("create_execution_context", [](const std::shared_ptr<Engine>& e) {
        auto c = std::make_unique<Context>();
        c->engine = e;
        c->ctx = e->create_execution_context();
        return c;
      }, "A new context (own shapes, bindings, activation memory); it keeps the engine alive.");

  pyb::class_<Runtime>(m, "Runtime", "Loads plans (TensorRT's IRuntime).")
      .def_static("deserialize_engine", &deserialize, pyb::arg("plan"), pyb::arg("logger") = pyb::none(),
                  "Engine from plan bytes (any buffer); `logger` as BuilderConfig.logger gets the load's messages. "
                  "Raises InvalidPlanError on corrupt or foreign plans.")
      .def_static("load_engine", [](const std::string& path, pyb::object logger) {
        const Logger log = make_logger(std::move(logger));
        StatusOr<std::shared_ptr<Engine>> e = [&] {
          pyb::gil_scoped_release nogil;
          return Runtime::load_engine(path, log);
        }();
        return unwrap(std::move(e));
      }, pyb::arg("path"), pyb::arg("logger") = pyb::none(),
                  "Engine from a plan file. Raises NotFoundError, InvalidPlanError.");

  pyb::class_<Context>(m, "ExecutionContext", "One inference's shapes, bindings and memory (IExecutionContext).")
      .def_property_readonly("engine", [](const Context& c) { return std::const_pointer_cast<Engine>(c.engine); })
      .def("set_optimization_profile", [](Context& c, int i) { check(c.ctx->set_optimization_profile(i)); })
      .def_property_readonly("optimization_profile", [](const Context& c) { return c.ctx->optimization_profile(); })
      .def("set_input_shape", [](Context& c, const std::string& name, const Shape& shape) {
        StatusOr<Shape> before = c.ctx->tensor_shape(name);
        check(c.ctx->set_input_shape(name, shape));
        // New shapes give the context a new device arena: graphs captured on the old one go.
        if (!before.ok() || *before != shape) c.graphs.clear();
      }, pyb::arg("name"), pyb::arg("shape"),
           "Fixes input `name`'s shape. Raises InvalidArgumentError naming the dim and the profile's bounds.")
      .def("set_input", [](Context& c, const std::string& name, const pyb::array& a) {
        c.graphs.clear();  // host execution may prepare the context for other shapes (a new arena)
        check(c.ctx->set_input(name, tensor_from_numpy(a, "input '" + name + "'")));
      }, pyb::arg("name"), pyb::arg("array"),
           "Binds a host input (copied; any strides). Raises InvalidArgumentError on a wrong dtype or shape.")
      .def("execute", [](Context& c) {
        Status s;
        {
          pyb::gil_scoped_release nogil;
          s = c.ctx->execute();
        }
        check(s);
      }, "Runs on the bound host inputs (synchronous; GIL released).")
      .def("output", [](const Context& c, const std::string& name) { return to_numpy(unwrap(c.ctx->output(name))); },
           "Output `name` of the last execute() as a numpy array sharing the result's storage (kept alive "
           "by the array; a later execute may reuse it: copy to keep).")
      .def("set_profiling", [](Context& c, bool on) { c.ctx->set_profiling(on); })
      .def_property_readonly("layer_timings", [](const Context& c) { return c.ctx->layer_timings(); })
      .def("set_cuda_graph", [](Context& c, bool on) { c.ctx->set_cuda_graph(on); },
           "execute() captures its layers into a CUDA graph once per shapes and replays it (CUDA engines).")
      .def("set_tensor_address", [](Context& c, const std::string& name, uintptr_t address) {
        check(c.ctx->set_tensor_address(name, as_pointer(address)));
      }, pyb::arg("name"), pyb::arg("address"),
           "Binds io tensor `name` to device (or pinned host) memory at integer `address`: row-major, in the io "
           "tensor's dtype (Engine.io_tensors: the model's declared dtype, or BuilderConfig.output_types').")
      .def("tensor_address", [](const Context& c, const std::string& name) {
        return reinterpret_cast<uintptr_t>(c.ctx->tensor_address(name));
      })
      .def("tensor_shape", [](const Context& c, const std::string& name) {
        return pyb::tuple(pyb::cast(unwrap(c.ctx->tensor_shape(name))));
      }, "The shape `name` has for the next enqueue (outputs computed from the input shapes).")
      .def("enqueue", &enqueue_released, pyb::arg("stream") = 0, "Enqueues one inference on cudaStream_t `stream` (0: legacy default); GIL released.")
      .def("execute_async", &enqueue_released, pyb::arg("stream") = 0, "Same as enqueue (TensorRT's executeAsync name).")
      .def("enqueue_bound", [](Context& c, const std::vector<uintptr_t>& addresses, uintptr_t stream, bool graph) {
        const auto& io = c.engine->io_tensors();
        if (addresses.size() != io.size())
          throw StatusError{invalid_argument("enqueue_bound: " + std::to_string(addresses.size()) + " addresses for " +
                                             std::to_string(io.size()) + " io tensors")};
        auto bind_all = [&] {
          for (size_t i = 0; i < io.size(); ++i) check(c.ctx->set_tensor_address(io[i].desc.name, as_pointer(addresses[i])));
        };
        Status s;
        if (graph) {
          // A graph captured for these addresses and input shapes replays without rebinding (its
          // kernels hold the addresses; binding checks each pointer with the driver, ~1 µs each).
          std::vector<int64_t> key(addresses.begin(), addresses.end());
          for (const IOTensor& t : io) {
            if (!t.is_input) continue;
            StatusOr<Shape> sh = c.ctx->tensor_shape(t.desc.name);
            if (!sh.ok()) {
              s = sh.status();
              break;
            }
            key.push_back(-1);
            key.insert(key.end(), sh->begin(), sh->end());
          }
          check(s);
          if (!c.graphs.has(key)) bind_all();
          {
            pyb::gil_scoped_release nogil;
            s = c.graphs.launch(*c.ctx, key, stream);
          }
          check(s);
        } else {
          bind_all();
          enqueue_released(c, stream);
        }
      }, pyb::arg("addresses"), pyb::arg("stream"), pyb::arg("cuda_graph") = false,
           "One call for the Pythonic path: binds every io tensor (engine order) and enqueues on `stream`; with "
           "cuda_graph, replays a graph captured for these addresses and shapes (captured on first use).")
      .def_property_readonly("cuda_graphs", [](const Context& c) { return c.graphs.size(); },
                             "How many CUDA graphs enqueue_bound has captured and keeps.");
}

}  // namespace kiln::py
