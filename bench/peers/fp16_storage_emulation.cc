// How much of an FP16 engine's error is FP16 storage itself: runs a model on the CPU reference
// in FP32, and again with every weight and every float activation rounded to FP16 after each
// layer (FP32 arithmetic in between), and prints the difference. A GPU FP16 engine close to this
// number loses nothing beyond the format.
//   kiln_fp16_emulation MODEL.onnx   (input: seeded N(0,1), batch 8, 3x224x224)
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <random>
#include "onnx/importer.h"
#include "passes/passes.h"
#include "ir/shape_inference.h"
#include "backends/cpu/interpreter.h"
#include "core/numerics.h"
using namespace kiln;

namespace {

// The pass pipeline's options as the builder sets them: the CPU reference kernels fold constants.
passes::PassOptions reference_pass_options() {
  passes::PassOptions o;
  o.evaluator = &reference_evaluator();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kiln_fp16_emulation MODEL.onnx\n");
    return 2;
  }
  auto g0 = onnx_import::import_model_file(argv[1]);
  if (!g0.ok()) {
    std::fprintf(stderr, "%s\n", g0.status().to_string().c_str());
    return 2;
  }
  ir::Graph g = *g0;
  (void)ir::infer_shapes(g, nullptr, &reference_evaluator());
  (void)passes::run_pipeline(g, reference_pass_options());
  g.compact();
  ir::Graph h = g;
  for (auto& v : h.values) if (v.constant && v.constant->dtype() == DataType::kFloat32) {
    Tensor t = v.constant->clone();
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = fp16_to_float(float_to_fp16(t.data<float>()[i]));
    v.constant = std::make_shared<Tensor>(t);
  }
  // Insert Cast(fp16)->Cast(fp32) after every node output.
  std::vector<ir::Node> nodes = h.nodes;
  ir::Graph e = h; e.nodes.clear();
  for (auto& n : nodes) {
    ir::Node c = n; c.id = -1;
    std::vector<ir::ValueId> outs = c.outputs;
    e.add_node(c);
    for (ir::ValueId o : outs) {
      if (o == ir::kNoValue) continue;
      // rename: the node writes a temp; casts produce the original id
      ir::ValueId t1 = e.add_value(e.value(o).name + "_raw", DataType::kFloat32);
      ir::ValueId t2 = e.add_value(e.value(o).name + "_h", DataType::kFloat16);
      for (auto& oo : e.nodes.back().outputs) if (oo == o) oo = t1;
      ir::Node a; a.name = n.name + "_toh"; a.op = ir::OpKind::kCast; a.opset = 17; a.inputs = {t1}; a.outputs = {t2};
      ir::Attribute to; to.kind = ir::Attribute::Kind::kInt; to.i = 10; a.attrs["to"] = to;
      e.add_node(a);
      ir::Node b; b.name = n.name + "_tof"; b.op = ir::OpKind::kCast; b.opset = 17; b.inputs = {t2}; b.outputs = {o};
      to.i = 1; b.attrs["to"] = to;
      e.add_node(b);
    }
  }
  int batch = 8;
  Tensor x(DataType::kFloat32, {batch, 3, 224, 224});
  std::mt19937 rng(7); std::normal_distribution<float> nd;
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
  auto a = interpret(g, {x}); auto b = interpret(e, {x});
  if (!a.ok() || !b.ok()) { printf("%s %s\n", a.status().to_string().c_str(), b.status().to_string().c_str()); return 1; }
  double num=0, den=0, dot=0, na=0, nb=0; int top1=0;
  const float* p=(*a)[0].data<float>(); const float* q=(*b)[0].data<float>();
  for (int r=0;r<batch;++r){ int ia=0, ib=0; for (int i=0;i<1000;++i){ float u=p[r*1000+i], v=q[r*1000+i]; if(u>p[r*1000+ia])ia=i; if(v>q[r*1000+ib])ib=i; num=std::max(num,(double)std::fabs(u-v)); den=std::max(den,(double)std::fabs(u)); dot+=u*v; na+=u*u; nb+=v*v;} top1+=ia==ib; }
  printf("fp16-storage emulation vs fp32: rel %.3g cosine %.7f top1 %d/%d\n", num/den, dot/std::sqrt(na*nb), top1, batch);
}
