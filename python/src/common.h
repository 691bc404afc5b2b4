// Shared by the _kiln binding files: Status -> Python exception, dtype <-> numpy dtype, host
// Tensor <-> numpy array, JSON -> Python objects. Every user error leaves the library as a
// Status; here it becomes a kiln.KilnError subclass whose str() is Status::to_string(), the text
// the CLI prints after "kiln <command>: ".
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kiln/logger.h"
#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln::py {

namespace pyb = pybind11;

// Carries a failed Status to the exception translator (module.cc), which raises the Python
// exception class for its code with attributes `code` (e.g. "Unsupported") and, for
// unsupported-op reports, `nodes` (one line per unsupported node).
struct StatusError {
  Status status;
};

// Raises on error.
inline void check(const Status& s) {
  if (!s.ok()) throw StatusError{s};
}
template <typename T>
T unwrap(StatusOr<T>&& s) {
  if (!s.ok()) throw StatusError{s.status()};
  return std::move(s).value();
}

// Registers the exception classes (KilnError and one subclass per StatusCode) and the translator.
void register_errors(pyb::module_& m);

// numpy dtype of a Kiln dtype; throws StatusError (Unsupported) for dtypes numpy lacks
// (bf16, fp8, 4-bit: convert with to_numpy, which widens them to float32).
pyb::dtype numpy_dtype(DataType t);
// Kiln dtype of a numpy dtype; kUndefined when Kiln has none.
DataType dtype_from_numpy(const pyb::dtype& d);
// A host Tensor as a numpy array sharing its storage (bf16 / fp8 / 4-bit widened to float32).
pyb::array to_numpy(const Tensor& t);
// A C-contiguous copy of `a` as a Tensor of its dtype; errors name `what` and the dtype.
Tensor tensor_from_numpy(const pyb::array& a, const std::string& what);
// JSON -> dict / list / str / float / int / bool / None.
pyb::object to_python(const nlohmann::json& j);

// A Logger calling a Python callable(LogSeverity, str) under the GIL (empty for None).
Logger make_logger(pyb::object f);

void init_builder(pyb::module_& m);
void init_runtime(pyb::module_& m);
void init_tools(pyb::module_& m);

}  // namespace kiln::py
