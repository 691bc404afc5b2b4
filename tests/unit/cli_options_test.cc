// `kiln` option groups (parsing and conversion to BuilderConfig) and `kiln compare` metrics.
#include <gtest/gtest.h>

#include <cmath>

#include "tools/kiln/metrics.h"
#include "tools/kiln/options.h"
#include "tools/kiln/profile.h"

namespace kiln::cli {
namespace {

TEST(CliOptions, ParsesDimsAndShapes) {
  EXPECT_EQ(*parse_dims("1x3x224x224"), (Shape{1, 3, 224, 224}));
  EXPECT_EQ(*parse_dims("7"), (Shape{7}));
  EXPECT_EQ(*parse_dims(""), Shape{});
  EXPECT_FALSE(parse_dims("1x").ok());
  EXPECT_FALSE(parse_dims("1x-3").ok());
  EXPECT_FALSE(parse_dims("ax3").ok());
  auto s = parse_shapes("x:1x3,ns:tok:2x5");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->at("x"), (Shape{1, 3}));
  EXPECT_EQ(s->at("ns:tok"), (Shape{2, 5}));  // names may contain ':'
  EXPECT_NE(parse_shapes("x1x3").status().message().find("expected name:dims"), std::string::npos);
  EXPECT_NE(parse_shapes("x:1,x:2").status().message().find("given twice"), std::string::npos);
  EXPECT_NE(parse_shapes("x:1xq").status().message().find("input 'x'"), std::string::npos);
}

TEST(CliOptions, ParsesInputSpecs) {
  auto s = parse_input_specs({"x=a.npy", "mask=dir/b=c.pb"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->at("x"), "a.npy");
  EXPECT_EQ(s->at("mask"), "dir/b=c.pb");
  EXPECT_FALSE(parse_input_specs({"x.npy"}).ok());
  EXPECT_FALSE(parse_input_specs({"x="}).ok());
  EXPECT_FALSE(parse_input_specs({"x=a", "x=b"}).ok());
}

StatusOr<BuilderConfig> build_config(const std::string& args) {
  CLI::App app;
  BuildOptions o;
  o.add_to(&app);
  app.parse(args, false);
  return o.to_config();
}

TEST(CliOptions, BuildOptionsMakeTheProfile) {
  auto c = build_config("m.onnx -o m.plan --shapes x:4x3");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->profiles.size(), 1u);
  const ShapeRange* r = c->profiles[0].find("x");
  EXPECT_EQ(r->min, (Shape{4, 3}));
  EXPECT_EQ(r->opt, (Shape{4, 3}));
  EXPECT_EQ(r->max, (Shape{4, 3}));
  EXPECT_TRUE(c->tf32);
  EXPECT_EQ(c->target, TargetDevice::kAuto);

  c = build_config("m.onnx -o m.plan --min-shapes x:1x3 --opt-shapes x:4x3 --max-shapes x:8x3 --fp16 --no-tf32 "
                   "--workspace 64 --device cpu");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  r = c->profiles[0].find("x");
  EXPECT_EQ(r->min, (Shape{1, 3}));
  EXPECT_EQ(r->opt, (Shape{4, 3}));
  EXPECT_EQ(r->max, (Shape{8, 3}));
  EXPECT_TRUE(c->fp16);
  EXPECT_FALSE(c->tf32);
  EXPECT_EQ(c->workspace_limit, 64u << 20);
  EXPECT_EQ(c->target, TargetDevice::kCpu);

  c = build_config("m.onnx -o m.plan --bf16 --timing-cache cache.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->bf16);
  EXPECT_FALSE(c->fp16);
  EXPECT_EQ(c->timing_cache_path, "cache.json");
  EXPECT_EQ(build_config("m.onnx -o p")->timing_cache_path, "");
  EXPECT_TRUE(build_config("m.onnx -o p").value().profiles.empty());  // static models need no shapes
  EXPECT_EQ(build_config("m.onnx -o p --device gpu")->target, TargetDevice::kCuda);
  EXPECT_EQ(build_config("m.onnx -o p")->max_aux_streams, -1);  // the builder decides
  EXPECT_EQ(build_config("m.onnx -o p --max-aux-streams 0")->max_aux_streams, 0);
  EXPECT_EQ(build_config("m.onnx -o p --max-aux-streams 4")->max_aux_streams, 4);
  EXPECT_TRUE(build_config("m.onnx -o p")->layer_precisions.empty());
  c = build_config("m.onnx -o p --bf16 --layer-precisions /layer4/*:fp32,/fc/Gemm:fp16");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->layer_precisions.size(), 2u);
  EXPECT_EQ(c->layer_precisions[0].pattern, "/layer4/*");
  EXPECT_EQ(c->layer_precisions[0].precision, DataType::kFloat32);
  EXPECT_EQ(c->layer_precisions[1].pattern, "/fc/Gemm");
  EXPECT_EQ(c->layer_precisions[1].precision, DataType::kFloat16);
}

TEST(CliOptions, BuildOptionErrors) {
  auto lp = build_config("m.onnx -o p --layer-precisions conv1:int4");
  EXPECT_NE(lp.status().message().find("precision 'int4', expected fp32, fp16 or bf16"), std::string::npos)
      << lp.status().message();
  auto c = build_config("m.onnx -o p --min-shapes x:1x3 --max-shapes x:8x3");
  EXPECT_NE(c.status().message().find("--opt-shapes is missing"), std::string::npos) << c.status().message();
  c = build_config("m.onnx -o p --shapes x:1x3 --max-shapes x:8x3");
  EXPECT_NE(c.status().message().find("both --shapes and --max-shapes"), std::string::npos) << c.status().message();
  c = build_config("m.onnx -o p --min-shapes x:4x3 --opt-shapes x:2x3 --max-shapes x:8x3");
  EXPECT_NE(c.status().message().find("min 4 > opt 2"), std::string::npos) << c.status().message();
  c = build_config("m.onnx -o p --max-aux-streams 17");
  EXPECT_NE(c.status().message().find("--max-aux-streams 17: expected 0..16"), std::string::npos) << c.status().message();
  EXPECT_THROW(build_config("m.onnx -o p --device tpu"), CLI::ValidationError);
  EXPECT_THROW(build_config("m.onnx"), CLI::RequiredError);
}

TEST(CliOptions, BuildOptimizerOptions) {
  auto c = build_config("m.onnx -o p");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->opt_level, 2);
  EXPECT_TRUE(c->disabled_passes.empty());
  EXPECT_FALSE(c->verify_passes);
  c = build_config("m.onnx -o p --opt-level 3 --disable-pass fold_batchnorm --disable-pass common_subexpression "
                   "--dump-after fuse_conv_epilogue --verify-passes");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->opt_level, 3);
  EXPECT_EQ(c->disabled_passes, (std::set<std::string>{"fold_batchnorm", "common_subexpression"}));
  EXPECT_EQ(c->dump_after_pass, "fuse_conv_epilogue");
  EXPECT_TRUE(c->verify_passes);
  c = build_config("m.onnx -o p --opt-level 4");
  EXPECT_NE(c.status().message().find("--opt-level 4"), std::string::npos) << c.status().message();
  c = build_config("m.onnx -o p --disable-pass fold_everything");
  EXPECT_NE(c.status().message().find("'fold_everything': no such pass"), std::string::npos) << c.status().message();
  c = build_config("m.onnx -o p --dump-after nope");
  EXPECT_NE(c.status().message().find("--dump-after 'nope'"), std::string::npos) << c.status().message();
}

TEST(CliOptions, BuildOutputTypes) {
  auto c = build_config("m.onnx -o p");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->output_types, "");
  c = build_config("m.onnx -o p --fp16 --output-types fp16,,fp32");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->output_types, "fp16,,fp32");  // checked against the model's outputs by the builder
}

TEST(CliOptions, OtherCommands) {
  CLI::App app;
  CompareOptions c;
  c.add_to(&app);
  app.parse("p.plan m.onnx --input x=a.npy --input y=b.pb --top-k 3 --atol 0.1 --seed 9", false);
  EXPECT_EQ(c.plan, "p.plan");
  EXPECT_EQ(c.model, "m.onnx");
  EXPECT_EQ(c.top_k, 3);
  EXPECT_DOUBLE_EQ(c.atol, 0.1);
  auto parsed = c.inference.parse();
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->files.size(), 2u);
  EXPECT_EQ(parsed->seed, 9u);
  CLI::App app2;
  BenchOptions b;
  b.add_to(&app2);
  app2.parse("p.plan --iterations 0", false);
  EXPECT_FALSE(b.validate().ok());
  EXPECT_EQ(b.warmup, 10);
}

TEST(CliOptions, RunAndBenchProfilingAndStreams) {
  CLI::App app;
  BenchOptions b;
  b.add_to(&app);
  app.parse("p.plan --streams 4 --cuda-graph --dump-profile prof.json", false);
  EXPECT_EQ(b.streams, 4);
  EXPECT_TRUE(b.cuda_graph);
  EXPECT_EQ(b.dump_profile, "prof.json");
  EXPECT_TRUE(b.validate().ok());
  b.streams = 0;
  EXPECT_NE(b.validate().message().find("--streams 0"), std::string::npos);
  CLI::App app2;
  RunOptions r;
  r.add_to(&app2);
  app2.parse("p.plan --cuda-graph --dump-profile x.json", false);
  EXPECT_TRUE(r.cuda_graph);
  EXPECT_EQ(r.dump_profile, "x.json");
  EXPECT_TRUE(check_cuda_only_flags(true, true, 8).ok());
  EXPECT_TRUE(check_cuda_only_flags(false, false, 1).ok());
  EXPECT_NE(check_cuda_only_flags(false, true, 1).message().find("--cuda-graph needs a CUDA plan"), std::string::npos);
  EXPECT_NE(check_cuda_only_flags(false, false, 2).message().find("--streams 2 needs a CUDA plan"), std::string::npos);
}

TEST(CliProfile, MedianAndShareByLayer) {
  std::vector<std::vector<LayerTiming>> runs = {
      {{"a", "Conv", "t1", 1.0}, {"b", "Relu", "t2", 3.0}},
      {{"a", "Conv", "t1", 3.0}, {"b", "Relu", "t2", 1.0}},
      {{"a", "Conv", "t1", 2.0}, {"b", "Relu", "t2", 6.0}},
  };
  auto p = reduce_profile(runs);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].name, "a");
  EXPECT_EQ((*p)[0].op, "Conv");
  EXPECT_EQ((*p)[1].tactic, "t2");
  EXPECT_DOUBLE_EQ((*p)[0].median_ms, 2.0);
  EXPECT_DOUBLE_EQ((*p)[1].median_ms, 3.0);
  EXPECT_DOUBLE_EQ((*p)[0].share, 0.4);
  EXPECT_DOUBLE_EQ((*p)[1].share, 0.6);
  runs.push_back({{"a", "Conv", "t1", 4.0}, {"b", "Relu", "t2", 0.5}});  // even count: mean of the middle two
  p = reduce_profile(runs);
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ((*p)[0].median_ms, 2.5);
  runs.back().pop_back();
  EXPECT_FALSE(reduce_profile(runs).ok());
  EXPECT_FALSE(reduce_profile({}).ok());
}

TEST(CliOptions, SanitizesOutputNames) {
  EXPECT_EQ(sanitize_file_name("logits"), "logits");
  EXPECT_EQ(sanitize_file_name("out:0/a b"), "out_0_a_b");
  EXPECT_EQ(sanitize_file_name("a.b-c_d"), "a.b-c_d");
  EXPECT_EQ(sanitize_file_name(".."), "_..");
}

Tensor floats(Shape shape, std::vector<float> v) {
  Tensor t(DataType::kFloat32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

TEST(CompareMetrics, HandComputed) {
  const Tensor ref = floats({2, 3}, {1, 2, 3, -4, 0, 1});
  const Tensor act = floats({2, 3}, {1, 2.5f, 3, -4, 0, 1});
  const OutputMetrics m = compare_outputs(act, ref, 1, 1e-5, 1e-3);
  EXPECT_DOUBLE_EQ(m.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(m.max_rel, 0.25);
  EXPECT_DOUBLE_EQ(m.normalized, 0.5 / 4);
  EXPECT_EQ(m.violations, 1);
  EXPECT_FALSE(m.within_tolerance());
  EXPECT_EQ(m.top_k, 1);
  EXPECT_DOUBLE_EQ(m.topk_agreement, 1.0);  // row maxima: index 2 and 2 in both
  const double dot = 1 + 5 + 9 + 16 + 0 + 1, na = 1 + 6.25 + 9 + 16 + 1, nr = 1 + 4 + 9 + 16 + 1;
  EXPECT_NEAR(m.cosine, dot / std::sqrt(na * nr), 1e-12);
  EXPECT_TRUE(compare_outputs(ref, ref, 5, 0, 0).within_tolerance());
  EXPECT_EQ(compare_outputs(ref, ref, 5, 0, 0).top_k, 3);
}

TEST(CompareMetrics, TopKDisagreementNanAndShapes) {
  const Tensor ref = floats({2, 2}, {1, 2, 3, 4});
  const Tensor act = floats({2, 2}, {2, 1, 3, 4});
  EXPECT_DOUBLE_EQ(compare_outputs(act, ref, 1, 10, 0).topk_agreement, 0.5);
  const Tensor nan_act = floats({2, 2}, {NAN, 2, 3, 4});
  EXPECT_EQ(compare_outputs(nan_act, ref, 1, 10, 10).violations, 1);
  EXPECT_TRUE(compare_outputs(nan_act, nan_act, 1, 0, 0).within_tolerance());
  EXPECT_FALSE(compare_outputs(floats({4}, {1, 2, 3, 4}), ref, 1, 1, 1).mismatch.empty());
}

}  // namespace
}  // namespace kiln::cli

namespace kiln::cli {
namespace {

// Each --input takes one value, so positionals may follow it (`kiln compare --input x=a.npy PLAN MODEL`).
TEST(CliOptions, InputFlagTakesOneValueAndRepeats) {
  CLI::App app;
  InferenceOptions o;
  o.add_to(&app, true);
  std::vector<std::string> positionals;
  app.add_option("files", positionals);
  app.parse("--input x=a.npy --input y=b.pb model.plan model.onnx", false);
  EXPECT_EQ(o.inputs, (std::vector<std::string>{"x=a.npy", "y=b.pb"}));
  EXPECT_EQ(positionals, (std::vector<std::string>{"model.plan", "model.onnx"}));
}

}  // namespace
}  // namespace kiln::cli
