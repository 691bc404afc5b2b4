// CLI tensor helpers (see tensors.h).
#include "tools/kiln/tensors.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "core/numerics.h"
#include "io/input_file.h"
#include "io/npy.h"
#include "ir/graph.h"
#include "onnx/importer.h"
#include "runtime/engine_impl.h"

namespace kiln::cli {

StatusOr<Tensor> load_tensor_file(const std::string& path) {
  KILN_RETURN_IF_ERROR(io::check_input_file(path, "input file").status());
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("input file '" + path + "' not found or not readable");
  char magic[6] = {};
  f.read(magic, 6);
  if (f.gcount() == 6 && std::string(magic, 6) == "\x93NUMPY") return io::read_npy(path);
  return onnx_import::load_tensor_pb_file(path);
}

StatusOr<Tensor> random_tensor(DataType dtype, const Shape& shape, uint64_t seed) {
  if (dtype == DataType::kString || dtype == DataType::kUndefined)
    return unsupported(std::string("cannot generate random ") + dtype_name(dtype) + " data; give the input as a file");
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, shape, "random data"));
  std::mt19937_64 rng(seed);
  const int64_t n = t.numel();
  bool any_nonzero = false;
  if (dtype == DataType::kBool) {
    for (int64_t i = 0; i < n; ++i) {
      const bool b = rng() & 1;
      t.data<uint8_t>()[i] = b;
      any_nonzero |= b;
    }
    if (n && !any_nonzero) t.data<uint8_t>()[0] = 1;
  } else if (dtype_is_integer(dtype)) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = static_cast<int64_t>(rng() % 4);
      store_from_int64(dtype, t.raw(), i, v);
      any_nonzero |= v != 0;
    }
    if (n && !any_nonzero) store_from_int64(dtype, t.raw(), 0, 1);
  } else {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    for (int64_t i = 0; i < n; ++i) {
      double v = dist(rng);
      if (v == 0) v = 0.5;  // never exactly zero
      store_from_double(dtype, t.raw(), i, v);
    }
  }
  return t;
}

namespace {

// Random integer inputs that stay meaningful: token ids index every row of the embedding table
// they feed (a Gather's constant data, axis extent), attention masks are 0/1 (mostly 1). Other
// integer inputs keep random_tensor's [0, 4).
void shape_integer_input(const ir::Graph& g, const std::string& name, uint64_t seed, Tensor* t) {
  if (!dtype_is_integer(t->dtype()) || t->numel() == 0) return;
  ir::ValueId id = ir::kNoValue;
  for (ir::ValueId v : g.inputs)
    if (g.value(v).name == name) id = v;
  int64_t rows = 0;
  for (const ir::Node& n : g.nodes) {
    if (n.removed || n.op != ir::OpKind::kGather || n.inputs.size() < 2 || n.inputs[1] != id) continue;
    const auto& data = g.value(n.inputs[0]).constant;
    if (!data || data->rank() == 0) continue;
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += data->rank();
    if (axis >= 0 && axis < data->rank()) rows = rows ? std::min(rows, data->dim(axis)) : data->dim(axis);
  }
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (rows > 0) {
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < t->numel(); ++i) store_from_int64(t->dtype(), t->raw(), i, static_cast<int64_t>(rng() % rows));
  } else if (lower.find("mask") != std::string::npos) {
    for (int64_t i = 0; i < t->numel(); ++i)
      store_from_int64(t->dtype(), t->raw(), i, load_as_double(t->dtype(), t->raw(), i) != 0 ? 1 : 0);
  }
}

}  // namespace

StatusOr<std::vector<std::pair<std::string, Tensor>>> prepare_inputs(const Engine& engine,
                                                                      const std::map<std::string, std::string>& files,
                                                                      const std::map<std::string, Shape>& shapes,
                                                                      uint64_t seed, int profile) {
  std::string names;
  for (const IOTensor& io : engine.io_tensors())
    if (io.is_input) names += (names.empty() ? "'" : ", '") + io.desc.name + "'";
  auto check_names = [&](const std::string& name, const char* flag) -> Status {
    const IOTensor* io = engine.find_io(name);
    if (!io || !io->is_input)
      return invalid_argument(std::string(flag) + ": '" + name + "' is not an input of the plan (inputs: " +
                              (names.empty() ? "none" : names) + ")");
    return Status::Ok();
  };
  for (const auto& [name, path] : files) KILN_RETURN_IF_ERROR(check_names(name, "--input"));
  for (const auto& [name, s] : shapes) KILN_RETURN_IF_ERROR(check_names(name, "--shapes"));
  if (profile < 0 || profile >= static_cast<int>(engine.profiles().size()))
    return invalid_argument("optimization profile " + std::to_string(profile) + " does not exist");

  std::vector<std::pair<std::string, Tensor>> out;
  for (const IOTensor& io : engine.io_tensors()) {
    if (!io.is_input) continue;
    const std::string& name = io.desc.name;
    auto f = files.find(name);
    if (f != files.end()) {
      auto t = load_tensor_file(f->second);
      if (!t.ok()) return t.status().with_context("input '" + name + "'");
      out.emplace_back(name, std::move(t).value());
      continue;
    }
    Shape shape;
    auto s = shapes.find(name);
    if (s != shapes.end()) {
      shape = s->second;
    } else {
      const ShapeRange* r = engine.profiles()[profile].find(name);
      if (!r) return internal_error("profile has no range for input '" + name + "'");
      shape = r->opt;
    }
    // Each input's stream depends on the seed and its name, not on the input order.
    const uint64_t input_seed = seed ^ fnv1a64(reinterpret_cast<const uint8_t*>(name.data()), name.size());
    auto t = random_tensor(io.desc.dtype == DataType::kUndefined ? DataType::kFloat32 : io.desc.dtype, shape, input_seed);
    if (!t.ok()) return t.status().with_context("input '" + name + "'");
    shape_integer_input(engine_impl(engine).graph, name, input_seed, &t.value());
    out.emplace_back(name, std::move(t).value());
  }
  return out;
}

Status bind_inputs(ExecutionContext& ctx, const std::vector<std::pair<std::string, Tensor>>& inputs,
                   const std::map<std::string, Shape>& shapes) {
  for (const auto& [name, t] : inputs) {
    auto s = shapes.find(name);
    if (s != shapes.end()) KILN_RETURN_IF_ERROR(ctx.set_input_shape(name, s->second));
    KILN_RETURN_IF_ERROR(ctx.set_input(name, t));
  }
  return Status::Ok();
}

TensorStats tensor_stats(const Tensor& t) {
  TensorStats s;
  if (t.dtype() == DataType::kString || t.numel() == 0) return s;
  double sum = 0;
  int64_t finite = 0;
  bool first = true;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = load_as_double(t.dtype(), t.raw(), i);
    if (std::isnan(v)) {
      ++s.nan;
      continue;
    }
    if (first || v < s.min) s.min = v;
    if (first || v > s.max) s.max = v;
    first = false;
    sum += v;
    ++finite;
  }
  s.mean = finite ? sum / static_cast<double>(finite) : NAN;
  return s;
}

std::string tensor_summary(const std::string& name, const Tensor& t, int first) {
  const TensorStats s = tensor_stats(t);
  char buf[160];
  std::snprintf(buf, sizeof buf, " min %.6g max %.6g mean %.6g", s.min, s.max, s.mean);
  std::string r = name + " " + dtype_name(t.dtype()) + " " + shape_str(t.shape()) + buf;
  if (s.nan) r += " nan " + std::to_string(s.nan);
  r += " first [";
  for (int64_t i = 0; i < t.numel() && i < first; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", load_as_double(t.dtype(), t.raw(), i));
    r += buf;
  }
  if (t.numel() > first) r += ", ...";
  return r + "]";
}

Tensor npy_compatible(const Tensor& t) {
  switch (t.dtype()) {
    case DataType::kBFloat16: case DataType::kFloat8E4M3FN: case DataType::kFloat8E5M2:
    case DataType::kFloat4E2M1: case DataType::kNF4: case DataType::kInt4: case DataType::kUInt4:
    case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2FNUZ: case DataType::kFloat8E8M0:
    case DataType::kInt2: case DataType::kUInt2: {
      auto c = cast_tensor(t, dtype_is_float(t.dtype()) ? DataType::kFloat32 : DataType::kInt8);
      return c.ok() ? std::move(c).value() : t;
    }
    default: return t;
  }
}

}  // namespace kiln::cli
