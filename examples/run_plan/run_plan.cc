// kiln_run_plan: loads a plan and runs it, linked against kiln_runtime alone (no builder, no
// ONNX importer, no protobuf): what a deployment links. tests/layering/runtime_only.sh checks
// that the binary needs no protobuf/libonnx and that its outputs equal `kiln run`'s.
// Usage: kiln_run_plan PLAN OUT_DIR
//   Feeds every input a deterministic tensor at the first profile's opt shape (float:
//   sin(0.37 i + k); integer: i mod 3), writes OUT_DIR/in<k>.npy and OUT_DIR/out<k>.npy and
//   prints "input <k> <name>" / "output <k> <name>" lines. Exit 0 ok, 1 run error, 2 usage.
#include <cmath>
#include <cstdio>
#include <string>

#include "io/npy.h"
#include "kiln/runtime.h"

namespace {

kiln::StatusOr<kiln::Tensor> make_input(const kiln::DataType dtype, const kiln::Shape& shape, int k) {
  kiln::Tensor t(dtype, shape);
  const int64_t n = t.numel();
  switch (dtype) {
    case kiln::DataType::kFloat32:
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(std::sin(0.37 * i + k));
      return t;
    case kiln::DataType::kInt32:
      for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(i % 3);
      return t;
    case kiln::DataType::kInt64:
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = i % 3;
      return t;
    default:
      return kiln::unsupported(std::string("input dtype ") + kiln::dtype_name(dtype) +
                               ": kiln_run_plan feeds float32, int32 and int64 inputs");
  }
}

int fail(const kiln::Status& s) {
  std::fprintf(stderr, "kiln_run_plan: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kiln_run_plan PLAN OUT_DIR\n");
    return 2;
  }
  const std::string out_dir = argv[2];
  auto engine = kiln::Runtime::load_engine(argv[1]);
  if (!engine.ok()) return fail(engine.status());
  auto ctx = (*engine)->create_execution_context();
  int in_k = 0;
  for (const kiln::IOTensor& io : (*engine)->io_tensors()) {
    if (!io.is_input) continue;
    kiln::Shape shape = io.desc.dims;
    if (!(*engine)->profiles().empty())
      if (const kiln::ShapeRange* r = (*engine)->profiles()[0].find(io.desc.name)) shape = r->opt;
    auto t = make_input(io.desc.dtype, shape, in_k);
    if (!t.ok()) return fail(t.status().with_context("input '" + io.desc.name + "'"));
    const std::string path = out_dir + "/in" + std::to_string(in_k) + ".npy";
    if (kiln::Status s = kiln::io::write_npy(path, *t); !s.ok()) return fail(s);
    if (kiln::Status s = ctx->set_input(io.desc.name, *t); !s.ok()) return fail(s);
    std::printf("input %d %s\n", in_k++, io.desc.name.c_str());
  }
  if (kiln::Status s = ctx->execute(); !s.ok()) return fail(s);
  int out_k = 0;
  for (const kiln::IOTensor& io : (*engine)->io_tensors()) {
    if (io.is_input) continue;
    auto t = ctx->output(io.desc.name);
    if (!t.ok()) return fail(t.status());
    const std::string path = out_dir + "/out" + std::to_string(out_k) + ".npy";
    if (kiln::Status s = kiln::io::write_npy(path, *t); !s.ok()) return fail(s);
    std::printf("output %d %s\n", out_k++, io.desc.name.c_str());
  }
  return 0;
}
