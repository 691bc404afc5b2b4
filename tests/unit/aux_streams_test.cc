// Stream assignment and the concurrency-aware arena plan (src/backends/cuda/streams.h), without
// a GPU: a GoogLeNet-like 4-branch block (producers writing Concat slices in place), a ResNet
// downsample block, a residual chain that needs no aux stream, random DAGs checked against an
// independent happens-before closure and the arena conflict checker, and the real CUDA lowering
// of small Inception / ResNet graphs (plan_gpu_streams, which touches no device).
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA
#include <map>
#include <random>
#include <set>

#include "backends/cuda/gpu_model.h"
#include "backends/cuda/streams.h"
#include "gpu/branch_graphs.h"
#endif

namespace kiln::cuda {
namespace {

#ifdef KILN_HAVE_CUDA

// A layer list under construction: values with sizes, layers by name.
struct Dag {
  std::vector<StreamValue> vals;
  std::vector<StreamLayer> layers;
  std::vector<std::string> names;
  std::vector<int> inputs, outputs;
  int value(size_t bytes) {
    vals.push_back({bytes, -1, 0, true});
    return static_cast<int>(vals.size()) - 1;
  }
  int weight(size_t bytes) {
    vals.push_back({bytes, -1, 0, false});
    return static_cast<int>(vals.size()) - 1;
  }
  int slice(int of, int64_t offset, size_t bytes) {
    vals.push_back({bytes, of, offset, true});
    return static_cast<int>(vals.size()) - 1;
  }
  int layer(const std::string& name, std::vector<int> ins, std::vector<int> outs) {
    layers.push_back({std::move(ins), std::move(outs)});
    names.push_back(name);
    return static_cast<int>(layers.size()) - 1;
  }
};

// An Inception block after concat elimination: four branches from x write their slices of the
// Concat output `cat`, a head conv reads it. Layer order as an ONNX export lists them.
struct Inception {
  Dag d;
  int stem, b1, b2a, b2b, b3a, b3b, pool, b4, head;
  Inception() {
    const int in = d.value(4096);
    d.inputs = {in};
    const int x = d.value(8192);
    const int cat = d.value(4 * 4096);
    stem = d.layer("stem", {in, d.weight(64)}, {x});
    b1 = d.layer("b1", {x, d.weight(64)}, {d.slice(cat, 0, 4096)});
    const int t2 = d.value(4096), t3 = d.value(4096), t4 = d.value(8192);
    b2a = d.layer("b2a", {x, d.weight(64)}, {t2});
    b2b = d.layer("b2b", {t2, d.weight(64)}, {d.slice(cat, 4096, 4096)});
    b3a = d.layer("b3a", {x, d.weight(64)}, {t3});
    b3b = d.layer("b3b", {t3, d.weight(64)}, {d.slice(cat, 8192, 4096)});
    pool = d.layer("pool", {x}, {t4});
    b4 = d.layer("b4", {t4, d.weight(64)}, {d.slice(cat, 12288, 4096)});
    const int y = d.value(4096);
    head = d.layer("head", {cat, d.weight(64)}, {y});
    d.outputs = {y};
  }
};

// A ResNet bottleneck with a downsample branch: x -> conv1 -> conv2 -> conv3(+residual) and
// x -> downsample, the residual fused into conv3 (Kiln's FusedConv with z).
struct Bottleneck {
  Dag d;
  int stem, conv1, conv2, down, conv3, next;
  Bottleneck() {
    const int in = d.value(4096);
    d.inputs = {in};
    const int x = d.value(8192), a = d.value(2048), b = d.value(2048), r = d.value(8192), y = d.value(8192),
              z = d.value(8192);
    stem = d.layer("stem", {in, d.weight(64)}, {x});
    conv1 = d.layer("conv1", {x, d.weight(64)}, {a});
    conv2 = d.layer("conv2", {a, d.weight(64)}, {b});
    down = d.layer("down", {x, d.weight(64)}, {r});
    conv3 = d.layer("conv3", {b, d.weight(64), d.weight(64), r}, {y});
    next = d.layer("next", {y, d.weight(64)}, {z});
    d.outputs = {z};
  }
};

// Happens-before from the plan's own edges (stream order, event record -> wait), by search:
// an independent check of StreamPlan::ordered's vector clocks.
std::vector<std::vector<bool>> closure(const StreamPlan& sp) {
  const size_t n = sp.stream.size();
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));  // before[j][i]: i precedes j
  std::vector<int> last_on(static_cast<size_t>(sp.aux_streams + 1), -1);
  std::vector<int> recorder(static_cast<size_t>(sp.events), -1);
  for (size_t j = 0; j < n; ++j) {
    std::vector<int> preds;
    const int s = sp.stream[j];
    if (last_on[static_cast<size_t>(s)] >= 0) preds.push_back(last_on[static_cast<size_t>(s)]);
    for (int e : sp.waits[j]) {
      EXPECT_GE(recorder[static_cast<size_t>(e)], 0) << "layer " << j << " waits on event " << e << " before any record";
      if (recorder[static_cast<size_t>(e)] >= 0) preds.push_back(recorder[static_cast<size_t>(e)]);
    }
    for (int p : preds) {
      before[j][static_cast<size_t>(p)] = true;
      for (size_t i = 0; i < n; ++i)
        if (before[static_cast<size_t>(p)][i]) before[j][i] = true;
    }
    if (sp.record[j] >= 0) {
      EXPECT_EQ(recorder[static_cast<size_t>(sp.record[j])], -1) << "event " << sp.record[j] << " recorded twice";
      recorder[static_cast<size_t>(sp.record[j])] = static_cast<int>(j);
    }
    last_on[static_cast<size_t>(s)] = static_cast<int>(j);
  }
  return before;
}

void expect_all_on_caller_stream(const StreamPlan& sp) {
  EXPECT_EQ(sp.aux_streams, 0);
  EXPECT_EQ(sp.events, 0);
  for (size_t i = 0; i < sp.stream.size(); ++i) {
    EXPECT_EQ(sp.stream[i], 0) << "layer " << i;
    EXPECT_TRUE(sp.waits[i].empty()) << "layer " << i;
    EXPECT_EQ(sp.record[i], -1) << "layer " << i;
  }
}

TEST(AuxStreams, InceptionBranchesRunOnFourStreams) {
  Inception g;
  const StreamPlan sp = assign_streams(g.d.vals, g.d.layers, 3);
  EXPECT_EQ(sp.aux_streams, 3);
  // The four branches start on four different streams; each branch stays on its stream.
  const std::set<int> starts = {sp.stream[g.b1], sp.stream[g.b2a], sp.stream[g.b3a], sp.stream[g.pool]};
  EXPECT_EQ(starts.size(), 4u);
  EXPECT_EQ(sp.stream[g.b1], 0) << "the first branch continues the caller's stream";
  EXPECT_EQ(sp.stream[g.b2b], sp.stream[g.b2a]);
  EXPECT_EQ(sp.stream[g.b3b], sp.stream[g.b3a]);
  EXPECT_EQ(sp.stream[g.b4], sp.stream[g.pool]);
  // The join: the head runs on the caller's stream after every branch, waiting on three events.
  EXPECT_EQ(sp.stream[g.head], 0);
  EXPECT_EQ(sp.waits[g.head].size(), 3u);
  for (int l : {g.b1, g.b2b, g.b3b, g.b4}) EXPECT_TRUE(sp.ordered(l, g.head)) << g.d.names[l];
  // The fork: every branch follows the stem; branches are mutually concurrent (the producers
  // write disjoint slices of one Concat output, which is no dependency).
  for (int l : {g.b1, g.b2a, g.b3a, g.pool}) EXPECT_TRUE(sp.ordered(g.stem, l)) << g.d.names[l];
  const int last[] = {g.b1, g.b2b, g.b3b, g.b4};
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) EXPECT_TRUE(sp.concurrent(last[a], last[b])) << g.d.names[last[a]] << " / " << g.d.names[last[b]];

  const ArenaPlan a = plan_arena(g.d.vals, g.d.layers, g.d.inputs, g.d.outputs, sp);
  EXPECT_EQ(find_arena_conflict(g.d.vals, g.d.layers, a.offset, sp), "");
  // The sequential plan reuses b2a's output bytes for b3a's, which b2b may still be reading on
  // another stream: the widening is what makes the concurrent plan safe.
  const ArenaPlan seq = plan_arena(g.d.vals, g.d.layers, g.d.inputs, g.d.outputs, assign_streams(g.d.vals, g.d.layers, 0));
  EXPECT_NE(find_arena_conflict(g.d.vals, g.d.layers, seq.offset, sp), "");
  EXPECT_GE(a.bytes, seq.bytes);
}

TEST(AuxStreams, InceptionWithOneAuxStreamShares) {
  Inception g;
  const StreamPlan sp = assign_streams(g.d.vals, g.d.layers, 1);
  EXPECT_EQ(sp.aux_streams, 1);
  for (int s : sp.stream) EXPECT_LE(s, 1);
  EXPECT_EQ(sp.stream[g.b1], 0);
  EXPECT_EQ(sp.stream[g.b2a], 1);
  EXPECT_EQ(sp.stream[g.head], 0);
  for (int l : {g.b1, g.b2b, g.b3b, g.b4}) EXPECT_TRUE(sp.ordered(l, g.head)) << g.d.names[l];
  const ArenaPlan a = plan_arena(g.d.vals, g.d.layers, g.d.inputs, g.d.outputs, sp);
  EXPECT_EQ(find_arena_conflict(g.d.vals, g.d.layers, a.offset, sp), "");
}

TEST(AuxStreams, ZeroAuxStreamsIsTheSequentialPlan) {
  Inception g;
  const StreamPlan sp = assign_streams(g.d.vals, g.d.layers, 0);
  expect_all_on_caller_stream(sp);
  for (int i = 1; i < static_cast<int>(sp.stream.size()); ++i) EXPECT_TRUE(sp.ordered(i - 1, i));
  Bottleneck r;
  expect_all_on_caller_stream(assign_streams(r.d.vals, r.d.layers, 0));
  expect_all_on_caller_stream(assign_streams(r.d.vals, r.d.layers, -1));
}

TEST(AuxStreams, ResNetDownsampleRunsBesideTheMainPath) {
  Bottleneck g;
  const StreamPlan sp = assign_streams(g.d.vals, g.d.layers, 3);
  EXPECT_EQ(sp.aux_streams, 1) << "one fork needs one aux stream, whatever the cap";
  for (int l : {g.stem, g.conv1, g.conv2, g.conv3, g.next}) EXPECT_EQ(sp.stream[l], 0) << g.d.names[l];
  EXPECT_EQ(sp.stream[g.down], 1);
  EXPECT_TRUE(sp.ordered(g.stem, g.down));
  EXPECT_TRUE(sp.concurrent(g.down, g.conv1));
  EXPECT_TRUE(sp.concurrent(g.down, g.conv2));
  EXPECT_TRUE(sp.ordered(g.down, g.conv3));
  // One event each way: the downsample waits for the stem, conv3 for the downsample.
  EXPECT_EQ(sp.events, 2);
  EXPECT_EQ(sp.waits[g.down].size(), 1u);
  EXPECT_EQ(sp.waits[g.conv3].size(), 1u);
  EXPECT_TRUE(sp.waits[g.conv1].empty());
  const ArenaPlan a = plan_arena(g.d.vals, g.d.layers, g.d.inputs, g.d.outputs, sp);
  EXPECT_EQ(find_arena_conflict(g.d.vals, g.d.layers, a.offset, sp), "");
  // Outside the region (stem's input before it, `next`'s output after it) reuse continues:
  // the arena is smaller than the sum of all activations.
  EXPECT_LT(a.bytes, a.activation_sum);
}

// A residual connection (x feeds a LayerNorm-like chain and the Add at its end) is no branch:
// the Add already follows the chain, so nothing leaves the caller's stream.
TEST(AuxStreams, SkipConnectionNeedsNoAuxStream) {
  Dag d;
  const int in = d.value(1024);
  d.inputs = {in};
  const int x = d.value(1024), n = d.value(1024), q = d.value(1024), p = d.value(1024), y = d.value(1024);
  d.layer("embed", {in}, {x});
  d.layer("norm", {x}, {n});
  d.layer("qkv", {n, d.weight(64)}, {q});
  d.layer("proj", {q, d.weight(64)}, {p});
  d.layer("add", {x, p}, {y});
  d.outputs = {y};
  expect_all_on_caller_stream(assign_streams(d.vals, d.layers, 3));
}

// Write-after-read: a layer overwriting bytes another stream's layer reads must wait for it.
TEST(AuxStreams, InPlaceWriteWaitsForReadersOnOtherStreams) {
  Dag d;
  const int in = d.value(1024);
  d.inputs = {in};
  const int x = d.value(1024), a = d.value(1024), b = d.value(1024);
  const int l0 = d.layer("x", {in}, {x});
  const int l1 = d.layer("a", {x}, {a});
  const int l2 = d.layer("b", {x}, {b});        // a second reader of x: forks
  const int l3 = d.layer("inplace", {a}, {x});  // overwrites x (in place)
  d.outputs = {x, b};
  const StreamPlan sp = assign_streams(d.vals, d.layers, 2);
  EXPECT_NE(sp.stream[l1], sp.stream[l2]);
  EXPECT_TRUE(sp.ordered(l0, l2));
  EXPECT_TRUE(sp.ordered(l2, l3)) << "the overwrite of x must wait for its reader on the other stream";
  EXPECT_TRUE(sp.ordered(l1, l3));
}

// Random DAGs (with views, slices, in-place writes): the vector clocks agree with the plan's
// edges, every conflicting pair of layers is ordered, the arena has no unsafe overlap, and the
// cap holds.
TEST(AuxStreams, RandomGraphsAreSafe) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    Dag d;
    const int in = d.value(256 * (1 + rng() % 8));
    d.inputs = {in};
    std::vector<int> live = {in};
    const int nl = 2 + static_cast<int>(rng() % 30);
    for (int i = 0; i < nl; ++i) {
      std::vector<int> ins;
      const int k = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) ins.push_back(live[rng() % live.size()]);
      if (rng() % 4 == 0) ins.push_back(d.weight(64));
      std::vector<int> outs;
      const int kind = static_cast<int>(rng() % 8);
      if (kind == 0 && live.size() > 1) {
        outs.push_back(live[1 + rng() % (live.size() - 1)]);  // in place over a live value
      } else if (kind == 1) {  // two slices of one new storage, each its own later producer
        const int whole = d.value(1024);
        const int s0 = d.slice(whole, 0, 512), s1 = d.slice(whole, 512, 512);
        outs.push_back(s0);
        d.layer("r" + std::to_string(i), ins, outs);
        d.layer("s" + std::to_string(i), {live[rng() % live.size()]}, {s1});
        live.push_back(whole);
        continue;
      } else {
        outs.push_back(d.value(256 * (1 + rng() % 8)));
        if (rng() % 5 == 0) live.push_back(d.slice(outs[0], 0, 256));  // a view
      }
      d.layer("l" + std::to_string(i), ins, outs);
      live.push_back(outs[0]);
    }
    d.outputs = {live.back()};
    const int cap = static_cast<int>(rng() % 5);
    const StreamPlan sp = assign_streams(d.vals, d.layers, cap);
    SCOPED_TRACE("iteration " + std::to_string(iter) + ", cap " + std::to_string(cap));
    ASSERT_EQ(sp.stream.size(), d.layers.size());
    EXPECT_LE(sp.aux_streams, cap);
    const auto before = closure(sp);
    const int n = static_cast<int>(d.layers.size());
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < j; ++i) ASSERT_EQ(sp.ordered(i, j), static_cast<bool>(before[j][i])) << i << " -> " << j;
    const ArenaPlan a = plan_arena(d.vals, d.layers, d.inputs, d.outputs, sp);
    ASSERT_EQ(find_arena_conflict(d.vals, d.layers, a.offset, sp), "");
    // Logical hazards too: a layer reading a value some earlier layer wrote follows it.
    for (int j = 0; j < n; ++j)
      for (int v : d.layers[j].ins)
        for (int i = 0; i < j; ++i)
          for (int w : d.layers[i].outs)
            if (w == v) EXPECT_TRUE(sp.ordered(i, j)) << "layer " << j << " reads value " << v << " of layer " << i;
  }
}

// The CUDA lowering (concat elimination, horizontal fusion's Split views, NHWC reformats in
// FP16) planned with and without aux streams; plan_gpu_streams fails if the arena checker finds
// concurrent layers sharing bytes.
TEST(AuxStreams, LoweredGraphsPlanSafely) {
  using testing::cuda_config;
  using testing::inception;
  using testing::resnet_block;
  // The graph the builder lowers for each precision (builder_graph.h).
  struct Case {
    const char* name;
    ir::Graph (*make)(bool fp16);
    Shape in;
  };
  const Case cases[] = {{"inception b1", [](bool fp16) { return inception(1, 16, cuda_config(fp16)); }, {1, 8, 16, 16}},
                        {"inception b2", [](bool fp16) { return inception(2, 16, cuda_config(fp16)); }, {2, 8, 16, 16}},
                        {"resnet", [](bool fp16) { return resnet_block(2, 16, cuda_config(fp16)); }, {2, 16, 16, 16}}};
  for (const Case& c : cases)
    for (bool fp16 : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (fp16 ? " fp16" : " fp32"));
      const ir::Graph g = c.make(fp16);
      auto shapes = infer_value_shapes_by_reference(g, {c.in});
      ASSERT_TRUE(shapes.ok()) << shapes.status().to_string();
      GpuBuildOptions o;
      o.precision.fp16 = fp16;
      o.max_aux_streams = 0;
      auto seq = plan_gpu_streams(g, *shapes, o);
      ASSERT_TRUE(seq.ok()) << seq.status().to_string();
      EXPECT_EQ(seq->aux_streams, 0);
      for (int s : seq->streams) EXPECT_EQ(s, 0);
      o.max_aux_streams = -1;  // the builder decides
      auto par = plan_gpu_streams(g, *shapes, o);
      ASSERT_TRUE(par.ok()) << par.status().to_string();
      EXPECT_EQ(par->layers, seq->layers) << "aux streams change no layer";
      EXPECT_GE(par->arena_bytes, seq->arena_bytes);  // true of these graphs (first fit is not monotone in general)
      std::map<std::string, int> stream;
      for (size_t i = 0; i < par->layers.size(); ++i) stream[par->layers[i]] = par->streams[i];
      if (std::string(c.name) == "resnet") {
        EXPECT_EQ(par->aux_streams, 1);
        EXPECT_EQ(stream["down"], 1);
        for (const char* l : {"stem", "conv1", "conv2", "conv3", "head"}) EXPECT_EQ(stream[l], 0) << l;
      } else {
        // b1, the fused 1x1 reductions (b2a+b3a), the second reduction's 3x3 and the pool
        // branch: four ways, three aux streams; the head joins on the caller's stream.
        EXPECT_EQ(par->aux_streams, 3);
        EXPECT_EQ(stream["head"], 0);
        EXPECT_NE(stream["b1"], stream["b4"]);
        EXPECT_NE(stream["b2b"], stream["b3b"]);
      }
    }
}

#else

TEST(AuxStreams, NeedsTheCudaBackend) { GTEST_SKIP() << "built without CUDA (the stream planner is part of it)"; }

#endif

}  // namespace
}  // namespace kiln::cuda
