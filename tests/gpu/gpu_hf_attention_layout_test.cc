// The head Transposes of current Hugging Face exports folded into their Attention layers
// (passes::fold_attention_transposes, docs/decisions/0065), as the CUDA path lowers them, without
// a GPU: for each export under tests/data/hf_tiny (or $KILN_HF_EXPORTS; <model>/<model>.<exporter>.onnx
// with one <input>.npy per graph input, as scripts/export_hf.py writes them),
// cuda_layer_graph in fp16 with and without the pass, at the .npy shapes and with a dynamic batch
// (up to 4x). Every Attention layer it gives head_layout
// "bshd" takes exactly its four Transposes with it (Q, K, V, output; a RoPE region's run-time cos /
// sin may get one new Transpose each, shared by the layers), the Attention count is
// unchanged, and check_gpu_support (a lowering through the factories, no device) refuses no layer
// of the folded graph that it accepts without the pass. Prints, per model, the Transpose
// layers before and after.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "builder/build_from_graph.h"
#include "io/npy.h"
#include "kiln/builder.h"
#include "onnx/importer.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

struct Counts {
  int transposes = 0, attention = 0, bshd = 0;
  int added = 0;  // Transposes the fold adds: a run-time rank-4 operand of a RoPE region (cos / sin)
};

Counts count(const ir::Graph& g) {
  Counts c;
  for (const ir::Node& n : g.nodes) {
    if (n.removed) continue;
    c.transposes += n.op == ir::OpKind::kTranspose;
    const std::string suffix = "_bshd_transpose";
    c.added += n.op == ir::OpKind::kTranspose && n.name.size() > suffix.size() &&
               n.name.compare(n.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (n.op != ir::OpKind::kAttention) continue;
    ++c.attention;
    c.bshd += n.attr_string("head_layout", "bhsd") == "bshd";
  }
  return c;
}

TEST(GpuHfAttentionLayout, HeadTransposesLeaveTheCudaLayerGraph) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const char* env = std::getenv("KILN_HF_EXPORTS");
  const fs::path root = env && *env ? fs::path(env) : fs::path(KILN_SOURCE_DIR) / "tests/data/hf_tiny";
  ASSERT_TRUE(fs::is_directory(root)) << root << " does not exist (scripts/export_hf.py writes the exports)";
  int models = 0, folded_total = 0;
  for (const char* model : {"bert", "roberta", "gpt2", "llama", "qwen2", "t5", "vit"})
    for (const char* exporter : {"torchscript", "dynamo"}) {
      const fs::path dir = root / model;
      const fs::path file = dir / (std::string(model) + "." + exporter + ".onnx");
      if (!fs::exists(file)) continue;
      SCOPED_TRACE(file.string());
      auto g = onnx_import::import_model_file(file.string());
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      for (bool dynamic : {false, true}) {  // the .npy shapes; then a batch up to 4x theirs
      SCOPED_TRACE(dynamic ? "dynamic batch" : "static");
      OptimizationProfile prof;
      std::vector<Shape> shapes;
      for (ir::ValueId v : g->inputs) {
        const std::string& name = g->value(v).name;
        auto t = io::read_npy((dir / (name + ".npy")).string());
        ASSERT_TRUE(t.ok()) << "input '" << name << "': " << t.status().to_string();
        Shape max = t->shape();
        if (dynamic && !max.empty()) max[0] *= 4;
        ASSERT_TRUE(prof.set_dimensions(name, t->shape(), t->shape(), max).ok());
        shapes.push_back(t->shape());
      }
      BuilderConfig with;
      with.target = TargetDevice::kCuda;
      with.fp16 = true;
      with.profiles = {prof};
      BuilderConfig without = with;
      without.disabled_passes = {"fold_attention_transposes"};
      auto a = cuda_layer_graph(*g, with, nullptr);
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      auto b = cuda_layer_graph(*g, without, nullptr);
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      const Counts ca = count(*a), cb = count(*b);
      EXPECT_EQ(ca.attention, cb.attention);
      EXPECT_EQ(cb.bshd, 0);
      EXPECT_EQ(cb.transposes - (ca.transposes - ca.added), 4 * ca.bshd)
          << "each folded Attention takes exactly its four Transposes";
      EXPECT_LE(ca.added, 2 * ca.bshd);  // at most cos and sin per layer (shared: usually 2 in all)
      // The CUDA factories lower every folded Attention and the rotations it took along: the
      // layers check_gpu_support refuses in the folded graph (these test-size exports hold some
      // of other ops: GatherND / GatherElements of integer data) are among those it refuses
      // without the pass.
      auto refused = [&](const ir::Graph& x) {
        std::set<std::string> r;
        auto vs = cuda::infer_value_shapes_by_reference(x, shapes);
        EXPECT_TRUE(vs.ok()) << vs.status().to_string();
        if (!vs.ok()) return r;
        std::istringstream lines(cuda::check_gpu_support(x, *vs, true).message());
        for (std::string line; std::getline(lines, line);)
          if (line.rfind("  node '", 0) == 0) r.insert(line);
        return r;
      };
      const std::set<std::string> ra = refused(*a), rb = refused(*b);
      for (const std::string& line : ra) EXPECT_TRUE(rb.count(line)) << "refused only with the pass:" << line;
      std::printf("  %-8s %-12s %-7s Attention %3d (bshd %3d)  Transpose layers %4d -> %4d (of which %d of cos / sin)\n",
                  model, exporter, dynamic ? "dynamic" : "static", ca.attention, ca.bshd, cb.transposes, ca.transposes,
                  ca.added);
      ++models;
      folded_total += ca.bshd;
      }
    }
  if (models == 0) GTEST_SKIP() << "no export under " << root;
  EXPECT_GT(folded_total, 0) << "no Attention of any export was folded";
#endif
}

}  // namespace
}  // namespace kiln::testing
