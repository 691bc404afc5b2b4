// The _kiln extension module: exception classes, DataType, host tensor conversion helpers, and
// the builder / runtime / tools bindings (bindings_*.cc). The Python package kiln/ wraps it.
#include <pybind11/stl.h>

#include <cstring>
#include <sstream>

#include "common.h"
#include "runtime/gpu_engine.h"
#include "tools/kiln/tensors.h"

namespace kiln::py {
namespace {

// Python exception class per StatusCode (index = code); [0] is the base class KilnError.
PyObject* g_errors[static_cast<int>(StatusCode::kInternal) + 1] = {};

// The lines of an unsupported-op report ("3 unsupported ops:\n  node 'a' (Foo, ...)\n  ...").
std::vector<std::string> report_lines(const std::string& message) {
  std::vector<std::string> lines;
  std::istringstream in(message);
  std::string line;
  std::getline(in, line);  // the summary line
  while (std::getline(in, line))
    if (line.rfind("  ", 0) == 0) lines.push_back(line.substr(2));
  return lines;
}

void raise_status(const Status& s) {
  PyObject* cls = g_errors[static_cast<int>(s.code())];
  if (!cls) cls = g_errors[0];
  pyb::object exc = pyb::reinterpret_borrow<pyb::object>(cls)(s.to_string());
  exc.attr("code") = status_code_name(s.code());
  exc.attr("nodes") = s.code() == StatusCode::kUnsupported ? pyb::cast(report_lines(s.message())) : pyb::list();
  PyErr_SetObject(cls, exc.ptr());
}

PyObject* new_error(pyb::module_& m, const char* name, const char* doc, PyObject* bases) {
  const std::string qual = std::string("kiln.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases, nullptr);
  if (!cls) throw pyb::error_already_set();
  m.add_object(name, pyb::handle(cls));
  return cls;
}

}  // namespace

void register_errors(pyb::module_& m) {
  PyObject* base = new_error(m, "KilnError",
                             "Every error Kiln reports. str(e) is the CLI's message ('Unsupported: ...'); e.code is "
                             "the status code name; e.nodes lists the nodes of an unsupported-op report (else []).",
                             PyExc_RuntimeError);
  g_errors[0] = base;
  auto sub = [&](StatusCode code, const char* name, PyObject* also, const char* doc) {
    PyObject* bases = also ? PyTuple_Pack(2, base, also) : PyTuple_Pack(1, base);
    g_errors[static_cast<int>(code)] = new_error(m, name, doc, bases);
    Py_DECREF(bases);
  };
  sub(StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError, "Bad input: shapes, dtypes, options.");
  sub(StatusCode::kNotFound, "NotFoundError", PyExc_LookupError, "A file or a named tensor does not exist.");
  sub(StatusCode::kUnsupported, "UnsupportedError", nullptr,
      "An op, dtype or attribute Kiln does not implement; e.nodes lists every unsupported node.");
  sub(StatusCode::kInvalidModel, "InvalidModelError", nullptr, "Malformed or truncated ONNX.");
  sub(StatusCode::kInvalidPlan, "InvalidPlanError", nullptr, "Corrupt, truncated or incompatible plan.");
  sub(StatusCode::kOutOfMemory, "OutOfMemoryError", PyExc_MemoryError, "Host or device memory ran out.");
  sub(StatusCode::kInternal, "InternalError", nullptr, "A bug in Kiln.");
  pyb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      raise_status(e.status);
    }
  });
}

pyb::dtype numpy_dtype(DataType t) {
  switch (t) {
    case DataType::kFloat32: return pyb::dtype::of<float>();
    case DataType::kFloat64: return pyb::dtype::of<double>();
    case DataType::kFloat16: return pyb::dtype("float16");
    case DataType::kInt8: return pyb::dtype::of<int8_t>();
    case DataType::kInt16: return pyb::dtype::of<int16_t>();
    case DataType::kInt32: return pyb::dtype::of<int32_t>();
    case DataType::kInt64: return pyb::dtype::of<int64_t>();
    case DataType::kUInt8: return pyb::dtype::of<uint8_t>();
    case DataType::kUInt16: return pyb::dtype::of<uint16_t>();
    case DataType::kUInt32: return pyb::dtype::of<uint32_t>();
    case DataType::kUInt64: return pyb::dtype::of<uint64_t>();
    case DataType::kBool: return pyb::dtype::of<bool>();
    default: break;
  }
  throw StatusError{unsupported(std::string("dtype ") + dtype_name(t) + " has no numpy equivalent")};
}

DataType dtype_from_numpy(const pyb::dtype& d) {
  if (d.kind() == 'b') return DataType::kBool;
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt8, DataType::kInt16,
                     DataType::kInt32, DataType::kInt64, DataType::kUInt8, DataType::kUInt16, DataType::kUInt32,
                     DataType::kUInt64})
    if (numpy_dtype(t).equal(d)) return t;
  return DataType::kUndefined;
}

pyb::array to_numpy(const Tensor& tensor) {
  if (!tensor.is_tensor()) throw StatusError{unsupported("sequence and optional values cannot become numpy arrays")};
  Tensor t = cli::npy_compatible(tensor);  // bf16 / fp8 / 4-bit -> float32
  auto* owner = new Tensor(t);  // shares the storage; freed with the array
  pyb::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<pyb::ssize_t> shape(t.shape().begin(), t.shape().end());
  // Byte strides given explicitly: pybind11 2.10 (Debian 12) reads the element size out of
  // numpy's dtype struct, whose layout numpy 2 changed (the GPU machine's venv has numpy 2), so
  // strides it derives itself come out wrong there (0: every element read as the first).
  std::vector<pyb::ssize_t> strides(shape.size());
  pyb::ssize_t step = static_cast<pyb::ssize_t>(dtype_bits(t.dtype()) / 8);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  return pyb::array(numpy_dtype(t.dtype()), shape, strides, owner->raw(), base);
}

Tensor tensor_from_numpy(const pyb::array& a, const std::string& what) {
  const DataType dt = dtype_from_numpy(a.dtype());
  if (dt == DataType::kUndefined)
    throw StatusError{invalid_argument(what + ": numpy dtype " + std::string(pyb::str(static_cast<pyb::handle>(a.dtype()))) +
                                       " has no Kiln equivalent")};
  auto c = pyb::array::ensure(a, pyb::array::c_style);  // a copy only when `a` is not C-contiguous
  Shape shape(c.shape(), c.shape() + c.ndim());
  Tensor t(dt, shape);
  if (t.nbytes()) std::memcpy(t.raw(), c.data(), t.nbytes());
  return t;
}

pyb::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return pyb::none();
    case nlohmann::json::value_t::boolean: return pyb::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return pyb::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return pyb::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: return pyb::float_(j.get<double>());
    case nlohmann::json::value_t::string: return pyb::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      pyb::list l;
      for (const auto& e : j) l.append(to_python(e));
      return l;
    }
    case nlohmann::json::value_t::object: {
      pyb::dict d;
      for (const auto& [k, v] : j.items()) d[pyb::str(k)] = to_python(v);
      return d;
    }
    default: return pyb::none();
  }
}

}  // namespace kiln::py

PYBIND11_MODULE(_kiln, m) {
  using namespace kiln;
  using namespace kiln::py;
  m.doc() = "Kiln's C++ API (builder, runtime, tools). Use the `kiln` package, not this module.";
  m.attr("__version__") = KILN_VERSION_STRING;
  register_errors(m);

  pyb::enum_<DataType> dtype(m, "DataType", "Element types (names as the CLI prints them: dtype_name).");
  for (int i = 1; i < static_cast<int>(DataType::kCount); ++i) {
    const auto t = static_cast<DataType>(i);
    dtype.value(dtype_name(t), t);
  }
  m.def("dtype_name", &dtype_name, "'float32', 'float16', ... for a DataType.");
  m.def("dtype_from_name", [](const std::string& n) {
    const DataType t = dtype_from_name(n);
    if (t == DataType::kUndefined) throw StatusError{invalid_argument("unknown dtype '" + n + "'")};
    return t;
  }, "DataType of a name ('float32', 'fp16' is not a name: use 'float16'). Raises InvalidArgumentError.");
  m.def("dtype_itemsize", [](DataType t) { return dtype_bits(t) / 8.0; }, "Bytes per element (0.5 for 4-bit types).");
  m.def("numpy_dtype", &numpy_dtype, "numpy dtype of a DataType; raises UnsupportedError for bf16/fp8/4-bit.");
  m.def("dtype_from_numpy", [](const pyb::dtype& d) {
    const DataType t = dtype_from_numpy(d);
    if (t == DataType::kUndefined)
      throw StatusError{invalid_argument("numpy dtype " + std::string(pyb::str(static_cast<pyb::handle>(d))) + " has no Kiln equivalent")};
    return t;
  }, "DataType of a numpy dtype. Raises InvalidArgumentError.");

  m.def("cuda_available", [] { return gpu::available(); },
        "Whether this Kiln has the CUDA backend and the machine a CUDA GPU (target 'auto' then builds for CUDA).");

  init_builder(m);
  init_runtime(m);
  init_tools(m);
}
