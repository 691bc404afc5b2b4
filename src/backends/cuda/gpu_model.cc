// Lowering an optimized ir::Graph to CUDA layers, layout assignment, the activation memory
// plan (first-fit offsets from live ranges), weight upload and tactic setup. The execution
// context (the caller's stream plus aux streams for independent branches: planned in
// streams.cc, run by aux_streams.cc) is gpu_context.cc; the internals both share are in
// gpu_model_impl.h.
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_model_impl.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <thread>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/gpu_transformer.h"
#include "backends/cuda/layer_factory.h"
#include "backends/cuda/streams.h"
#include "core/numerics.h"
#include "ir/pointwise_program.h"
#include "kiln/plan.h"
#include "ir/shape_inference.h"
#include "ir/layer_annotations.h"
#include "backends/cpu/interpreter.h"

namespace kiln::cuda {

namespace {


int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// f(begin, end) over [0, n) in contiguous chunks on up to 16 threads (the calling one included)
// when `work` (elements touched) is large enough to pay for the threads; else inline. Weight
// preparation at load time (layout change, fp16/bf16 conversion) is ~40% of a ResNet-101 plan load.
template <typename F>
void parallel_for(int64_t n, int64_t work, F f) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::min<int64_t>({hw, 16, n, std::max<int64_t>(1, work >> 16)});
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = ceil_div(n, threads);
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back([&f, b, e] { f(b, e); });
  }
  f(int64_t{0}, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

// Adds the time until its end to *ms, when ms is not null (load phases, verbose load trace).
struct ScopedMs {
  explicit ScopedMs(double* ms) : ms_(ms), t0_(std::chrono::steady_clock::now()) {}
  ~ScopedMs() {
    if (ms_) *ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }
  ScopedMs(const ScopedMs&) = delete;
  ScopedMs& operator=(const ScopedMs&) = delete;
  double* ms_;
  std::chrono::steady_clock::time_point t0_;
};


// cudaMalloc whose error says what was being allocated, how many bytes, and the device's
// free/total memory at that moment.
class Lowering final : public LowerContext {
 public:
  Lowering(const ir::Graph& g, const ValueShapes& vs, const GpuBuildOptions& o, GpuModel::Impl* m)
      : g_(g), vs_(vs), o_(o), m_(m), plan_st_(o.storage()), st_(plan_st_), low_(st_ != StorageType::kF32) {}
  // Lower without touching the device (weights are not uploaded): for check_gpu_support.
  void dry_run() { dry_run_ = true; }

  // LowerContext (layer_factory.h): what the registered factories use.
  const ir::Graph& graph() const override { return g_; }
  const Shape& shape(ir::ValueId v) const override { return vs_.shapes[v]; }
  StorageType storage() const override { return st_; }
  bool nhwc(const ir::Node& n, bool dflt) const override { return nhwc_of(n, dflt); }
  StatusOr<int> activation(ir::ValueId v) override { return activation_of(v); }
  int as_layout(int value, bool nhwc) override { return as_layout(value, nhwc, std::string()); }
  int new_value(const std::string& name, const Shape& shape, StorageType type, bool nhwc) override {
    return new_val(name, shape, type, nhwc);
  }
  StorageType value_type(int value) const override { return m_->vals[value].type; }
  bool value_nhwc(int value) const override { return m_->vals[value].nhwc; }
  DataType dtype(ir::ValueId v) const override { return vs_.dtypes[v]; }
  void alias(int value, int of, int64_t offset) override {
    m_->vals[value].alias_of = of;
    m_->vals[value].alias_offset = offset;
  }
  void bind(ir::ValueId v, int value) override { act_[v] = value; }
  void add_layer(std::unique_ptr<Layer> l, const std::string& name, std::vector<int> ins, std::vector<int> outs,
                 std::vector<std::string> origin) override {
    l->name = name;
    l->ins = std::move(ins);
    l->outs = std::move(outs);
    l->origin = std::move(origin);
    m_->layers.push_back(std::move(l));
  }

  Status run() {
    // A graph through passes::assign_layouts carries each layer's layout ("layout" attribute)
    // and explicit Reformat layers; the lowering follows them. Without it (tests lowering a
    // graph directly), 16-bit storage means NHWC for conv/pool and elementwise layers follow.
    for (const ir::Node& n : g_.nodes) laid_out_ |= !n.removed && n.has_attr("layout");
    const auto consumers = g_.consumers();
    for (ir::ValueId v : g_.inputs) {
      // Integer inputs (token ids, masks) are staged as given; float inputs as float32.
      KILN_ASSIGN_OR_RETURN(StorageType in_t, input_storage(g_.value(v).name, vs_.dtypes[v]));
      const int staging = new_val(g_.value(v).name, vs_.shapes[v], in_t, false);
      m_->input_vals.push_back(staging);
      const Shape& s = vs_.shapes[v];
      if (storage_is_int(in_t)) {
        act_[v] = staging;
        continue;
      }
      // Stored in the plan's precision unless every consumer is constrained to fp32.
      bool all_fp32 = !consumers[static_cast<size_t>(v)].empty();
      for (ir::NodeId c : consumers[static_cast<size_t>(v)])
        all_fp32 &= node_storage(g_.node(c)) == StorageType::kF32;
      const bool low_in = low_ && !all_fp32;
      // The boundary conversion writes the layout the input's consumers want (assign_layouts' rule).
      bool nhwc = low_in && s.size() == 4;
      if (laid_out_ && nhwc) {
        nhwc = false;
        for (ir::NodeId c : consumers[static_cast<size_t>(v)])
          nhwc |= ir::tensor_core_layout_preference(g_, g_.node(c)) == ir::Layout::kNHWC;
      }
      if (!low_in) {
        act_[v] = staging;
      } else {
        // Channel padding for tensor-core convs: the internal copy is [N, Cp, H, W] NHWC.
        const int64_t cp = nhwc ? padded_channels(v) : 0;
        Shape internal_shape = s;
        if (cp > 0) {
          internal_shape[1] = cp;
          padded_from_[v] = s[1];
        }
        const int internal = new_val(g_.value(v).name + ":internal", internal_shape, st_, nhwc);
        add_layer(make_reformat_layer(s, StorageType::kF32, false, st_, nhwc, cp), "input_reformat:" + g_.value(v).name,
                  {staging}, {internal}, {});
        act_[v] = internal;
      }
    }
    std::vector<std::string> errors;
    for (const ir::Node& n : g_.nodes) {
      if (n.removed) continue;
      // Per-layer precision (the node's decided "precision"): its outputs and weights in that
      // storage; float inputs stored otherwise are converted on the way in (activation()), except
      // for views, which keep their input's storage.
      st_ = node_storage(n);
      low_ = st_ != StorageType::kF32;
      convert_inputs_ = !is_int_view(n.op) && n.op != ir::OpKind::kReformat;  // views keep their input's type
      Status s;
      {
        const ScopedMs timer(o_.logger ? &trace_ms_[ir::op_name(n.op)] : nullptr);
        cur_node_ = &n;
        s = lower(n);
        cur_node_ = nullptr;
      }
      convert_inputs_ = false;
      // Device failures (out of memory, ...) stop the build; the rest is collected.
      if (s.code() == StatusCode::kOutOfMemory || s.code() == StatusCode::kInternal)
        return s.with_context("layer '" + n.name + "'");
      if (!s.ok()) errors.push_back(s.message());
    }
    for (const auto& [op, ms] : trace_ms_) {
      char line[96];
      std::snprintf(line, sizeof line, "[load]   lower %-18s %8.1f ms", op.c_str(), ms);
      o_.logger(LogSeverity::kVerbose, line);
    }
    if (!errors.empty()) {
      std::string msg = std::to_string(errors.size()) + " layer(s) cannot run on the GPU:";
      for (const auto& e : errors) msg += "\n  " + e;
      return unsupported(msg);
    }
    st_ = plan_st_;
    low_ = st_ != StorageType::kF32;
    for (ir::ValueId v : g_.outputs) {
      KILN_ASSIGN_OR_RETURN(int a, activation(v));
      const GVal& gv = m_->vals[a];
      if (storage_is_int(gv.type))
        return unsupported("graph output '" + g_.value(v).name + "' has dtype " + storage_name(gv.type) +
                           ": CUDA engines return float outputs only in this version");
      if (gv.type == StorageType::kF32 && (layout_free(gv.shape) || !gv.nhwc) && gv.weight == nullptr) {
        m_->output_vals.push_back(a);
        continue;
      }
      const int out = new_val(g_.value(v).name, vs_.shapes[v], StorageType::kF32, false);
      if (gv.weight) return unsupported("graph output '" + g_.value(v).name + "' is a constant");
      add_layer(make_reformat_layer(gv.shape, gv.type, gv.nhwc && !layout_free(gv.shape), StorageType::kF32, false),
                "output_reformat:" + g_.value(v).name, {a}, {out}, {});
      m_->output_vals.push_back(out);
    }
    return Status::Ok();
  }

 private:
  // Channels to pad graph input `v` to (0 = none): fp16/bf16, rank 4, C % 8 != 0, and every
  // consumer a 2-D convolution with one group reading it as its data input (not a graph output).
  int64_t padded_channels(ir::ValueId v) const {
    const Shape& s = vs_.shapes[v];
    if (!o_.pad_input_channels || plan_st_ == StorageType::kF32 || s.size() != 4 || s[1] % 8 == 0) return 0;
    for (ir::ValueId o : g_.outputs)
      if (o == v) return 0;
    int uses = 0;
    for (const ir::Node& n : g_.nodes) {
      if (n.removed) continue;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.inputs[k] != v) continue;
        if (node_storage(n) != plan_st_) return 0;
        const bool conv = n.op == ir::OpKind::kConv || n.op == ir::OpKind::kFusedConv;
        if (!conv || k != 0 || n.attr_int("group", 1) != 1) return 0;
        ++uses;
      }
    }
    return uses > 0 ? (s[1] + 7) / 8 * 8 : 0;
  }

  int new_val(const std::string& name, const Shape& s, StorageType t, bool nhwc) {
    GVal v;
    v.name = name;
    v.shape = s;
    v.type = t;
    v.nhwc = nhwc && s.size() == 4;
    m_->vals.push_back(v);
    return static_cast<int>(m_->vals.size()) - 1;
  }

  // The storage a node computes in: its decided precision (the "precision" attribute written by
  // passes::assign_precisions on every layer of a built plan, docs/decisions/0033); the plan's
  // only for graphs lowered without that pass (tests lowering a graph directly).
  StorageType node_storage(const ir::Node& n) const {
    switch (ir::node_precision(n)) {
      case DataType::kFloat32: return StorageType::kF32;
      case DataType::kFloat16: return StorageType::kF16;
      case DataType::kBFloat16: return StorageType::kBF16;
      default: return plan_st_;
    }
  }

  // The activation of `v`; while a layer is lowered (convert_inputs_), a float activation stored
  // in another precision than the layer's comes through a convert layer (one per value and type,
  // in the value's layout).
  StatusOr<int> activation_of(ir::ValueId v) {
    auto it = act_.find(v);
    if (it == act_.end()) return unsupported("value '" + g_.value(v).name + "' is not available on the GPU");
    const int a = it->second;
    const GVal& gv = m_->vals[a];
    if (!convert_inputs_ || storage_is_int(gv.type) || gv.type == st_ || gv.weight) return a;
    auto key = std::make_pair(a, st_);
    auto c = converted_.find(key);
    if (c != converted_.end()) return c->second;
    const std::string name = gv.name + ":" + storage_name(st_);
    const int out = new_val(name, gv.shape, st_, gv.nhwc);
    add_layer(make_convert_layer(shape_numel(gv.shape), gv.type, st_), "convert:" + name, {a}, {out}, {});
    converted_[key] = out;
    return out;
  }

  // The layout a layer's 4-D activations use: the node's "layout" attribute when the graph went
  // through assign_layouts, else `dflt`.
  bool nhwc_of(const ir::Node& n, bool dflt) const {
    return n.has_attr("layout") ? n.attr_string("layout", "NCHW") == "NHWC" : dflt;
  }

  // A Reformat layer of the plan: the value in the layout it names (a view when nothing changes).
  Status lower_reformat(const ir::Node& n) {
    KILN_ASSIGN_OR_RETURN(int a, activation(n.inputs[0]));
    act_[n.outputs[0]] = as_layout(a, nhwc_of(n, false), n.name);
    return Status::Ok();
  }

  // The value in the wanted layout (a reformat layer is added once per value and layout).
  int as_layout(int gv, bool nhwc, const std::string& layer_name) {
    const GVal& v = m_->vals[gv];
    if (v.shape.size() != 4) return gv;
    if (layout_free(v.shape) || v.nhwc == nhwc) return gv;
    auto key = std::make_pair(gv, nhwc);
    auto it = reformatted_.find(key);
    if (it != reformatted_.end()) return it->second;
    const int out = new_val(v.name + (nhwc ? ":nhwc" : ":nchw"), v.shape, v.type, nhwc);
    add_layer(make_reformat_layer(v.shape, v.type, v.nhwc, v.type, nhwc),
              layer_name.empty() ? "reformat:" + v.name : layer_name, {gv}, {out}, {});
    reformatted_[key] = out;
    return out;
  }

  // A device copy of `bytes` host bytes: from the engine's weight cache, else owned by the model.
  StatusOr<void*> device_copy(const void* host, size_t bytes, const std::string& what) {
    if (o_.weight_cache) {
      auto c = o_.weight_cache->get(host, bytes);
      if (!c.ok()) return c.status().with_context(what);
      return c;
    }
    void* p = nullptr;
    KILN_RETURN_IF_ERROR(device_alloc(&p, std::max<size_t>(bytes, 16), what));
    m_->weight_allocs.push_back(p);
    if (bytes) KILN_CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    return p;
  }

  // A weight of the layer being lowered, uploaded in the storage type st_ as `count` elements
  // of the logical shape `logical`: the plan's packed bytes when it has them (no layout change,
  // no conversion), else `make()` (count floats, already in the element order the tactic reads)
  // converted to st_ — and, at build, recorded for the plan. `src` is the graph constant the
  // weight is made from (ir::kNoValue: made by the lowering, e.g. a zero bias).
  StatusOr<int> upload(const std::string& name, ir::ValueId src, size_t count, const Shape& logical, bool nhwc,
                       const std::function<const float*()>& make) {
    const ScopedMs timer(&m_->times.weights_ms);
    const int id = new_val(name, logical, st_, nhwc);
    const size_t bytes = count * storage_bytes(st_);
    if (dry_run_) {  // check_gpu_support: no device memory, so it also answers without a GPU
      m_->vals[id].weight = &dry_run_;
      return id;
    }
    const std::string layer = cur_node_ ? cur_node_->name : std::string();
    const std::string key = packed_weight_key(layer, name, st_, nhwc, logical);
    const std::string what = "weight '" + name + "'";
    void* p = nullptr;
    if (o_.packed) {
      auto it = o_.packed->by_key.find(key);
      if (it != o_.packed->by_key.end()) {
        if (it->second.bytes != bytes)
          return invalid_plan("packed weight '" + key + "' has " + std::to_string(it->second.bytes) +
                              " bytes; layer '" + layer + "' needs " + std::to_string(bytes));
        if (o_.weight_cache) {
          auto c = o_.weight_cache->get_packed(key, it->second.data, bytes);
          if (!c.ok()) return c.status().with_context(what);
          p = *c;
        } else {
          KILN_ASSIGN_OR_RETURN(p, device_copy(it->second.data, bytes, what));
        }
        ++m_->packed_hits;
        m_->vals[id].weight = p;
        m_->weights += bytes;
        return id;
      }
      if (src != ir::kNoValue && o_.packed->is_elided(src))
        return invalid_plan("layer '" + layer + "' needs weight '" + name + "' as " + key +
                            ", but the plan holds that constant only packed for other layouts");
    }
    const float* data = make();
    const void* host = data;
    if (st_ != StorageType::kF32) {
      // Scratch reused across weights: fresh pages per weight cost more than the conversion.
      if (hscratch_.size() < count) hscratch_.resize(count);
      uint16_t* h = hscratch_.data();
      const bool half = st_ == StorageType::kF16;
      parallel_for(static_cast<int64_t>(count), static_cast<int64_t>(count), [&](int64_t b, int64_t e) {
        if (half)
          for (int64_t i = b; i < e; ++i) h[i] = float_to_fp16(data[i]);
        else
          for (int64_t i = b; i < e; ++i) h[i] = float_to_bf16(data[i]);
      });
      host = h;
    }
    {
      const ScopedMs copy_timer(o_.logger ? &trace_ms_["(weights: hash + copy)"] : nullptr);
      KILN_ASSIGN_OR_RETURN(p, device_copy(host, bytes, what));
    }
    if (o_.record_packed) record_packed(key, layer, src, host, bytes);
    m_->vals[id].weight = p;
    m_->weights += bytes;
    return id;
  }

  // Build: keeps the weight's bytes for the plan, and that `layer` read constant `src` only
  // through them. A key recorded twice with other bytes is dropped (never stored, never elided).
  void record_packed(const std::string& key, const std::string& layer, ir::ValueId src, const void* host,
                     size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(host);
    if (m_->packed_conflicts.count(key)) return;
    auto it = m_->packed.find(key);
    if (it != m_->packed.end()) {
      if (it->second.size() != bytes || (bytes && std::memcmp(it->second.data(), b, bytes) != 0)) {
        m_->packed.erase(it);
        m_->packed_conflicts.insert(key);
        for (auto u = m_->packed_uses.begin(); u != m_->packed_uses.end();)
          u = u->first == layer ? m_->packed_uses.erase(u) : std::next(u);
      }
      return;
    }
    m_->packed.emplace(key, std::vector<uint8_t>(b, b + bytes));
    if (src != ir::kNoValue) m_->packed_uses.insert({layer, src});
  }

  static std::vector<float> floats_of(const Tensor& t) {
    std::vector<float> f(static_cast<size_t>(t.numel()));
    if (t.dtype() == DataType::kFloat32) {
      if (!f.empty()) std::memcpy(f.data(), t.raw(), f.size() * sizeof(float));
      return f;
    }
    for (int64_t i = 0; i < t.numel(); ++i) f[i] = static_cast<float>(load_as_double(t.dtype(), t.raw(), i));
    return f;
  }

  // An operand of a pointwise layer: an activation in the output's layout or a constant
  // uploaded in the output's physical order, broadcast-padded to the output rank.
  StatusOr<int> pointwise_operand(ir::ValueId v, const Shape& out, bool out_nhwc, Shape* phys) override {
    Shape s = vs_.shapes[v];
    while (s.size() < out.size()) s.insert(s.begin(), 1);
    *phys = (out_nhwc && s.size() == 4) ? Shape{s[0], s[2], s[3], s[1]} : s;
    if (const auto& c = g_.value(v).constant) {
      std::vector<float> f;
      return upload(g_.value(v).name, v, static_cast<size_t>(c->numel()), s, out_nhwc, [&] {
        f = floats_of(*c);
        if (out_nhwc && s.size() == 4 && !layout_free(s)) {
          std::vector<float> t(f.size());
          for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t ch = 0; ch < s[1]; ++ch)
              for (int64_t h = 0; h < s[2]; ++h)
                for (int64_t w = 0; w < s[3]; ++w)
                  t[((n * s[2] + h) * s[3] + w) * s[1] + ch] = f[((n * s[1] + ch) * s[2] + h) * s[3] + w];
          f = std::move(t);
        }
        return f.data();
      });
    }
    KILN_ASSIGN_OR_RETURN(int a, activation(v));
    if (vs_.shapes[v].size() != out.size() && out_nhwc && !layout_free(out) && vs_.shapes[v].size() > 1)
      return unsupported("broadcasting a rank-" + std::to_string(vs_.shapes[v].size()) + " activation onto NHWC");
    return vs_.shapes[v].size() == 4 ? as_layout(a, out_nhwc) : a;
  }

  Status lower(const ir::Node& n) {
    const std::string where = n.describe() + ": ";
    // Integer activations (graph inputs and their views) flow only into views, Gather indices and Cast.
    std::vector<bool> int_in;
    for (ir::ValueId v : n.inputs) int_in.push_back(act_.count(v) && storage_is_int(m_->vals[act_.at(v)].type));
    KILN_RETURN_IF_ERROR(check_int_operands(n, int_in));
    for (ir::ValueId v : n.outputs)
      if (v != ir::kNoValue && !is_float(vs_.dtypes[v]) && !(int_in.size() && int_in[0] && is_int_view(n.op)))
        return unsupported(where + std::string("output dtype ") + dtype_name(vs_.dtypes[v]));
    if (LayerFactory f = find_layer_factory(n.op)) return f(*this, n, where);
    switch (n.op) {
      case ir::OpKind::kConv:
      case ir::OpKind::kFusedConv: return lower_conv(n, where);
      case ir::OpKind::kFusedPointwise: return lower_fused_pointwise(n, where);
      case ir::OpKind::kGemm: return lower_gemm(n, where);
      case ir::OpKind::kMatMul: return has_2d_weight(n) ? lower_gemm(n, where) : lower_matmul(n, where);
      case ir::OpKind::kMatMulBias: return lower_gemm(n, where);
      case ir::OpKind::kAttention: return lower_attention(n, where);
      case ir::OpKind::kGather: return lower_gather(n, where);
      case ir::OpKind::kReformat: return lower_reformat(n);
      case ir::OpKind::kConcat:
        if (has_constant_input(n)) return lower_concat_with_constants(n, where);
        {
        const Shape& out_s = vs_.shapes[n.outputs[0]];
        int64_t axis = n.attr_int("axis", 1);
        if (axis < 0) axis += static_cast<int64_t>(out_s.size());
        // A channel concat of NHWC activations stays NHWC (outer = N*H*W, inner = channels):
        // no reformat round trip around it. The plan's layout attribute decides when present.
        const bool nhwc = nhwc_of(n, low_) && out_s.size() == 4 && axis == 1 && !layout_free(out_s);
        int64_t outer = 1;
        for (int64_t i = 0; i < axis; ++i) outer *= out_s[i];
        if (nhwc) outer = out_s[0] * out_s[2] * out_s[3];
        std::vector<int> ins;
        std::vector<int64_t> inner;
        for (ir::ValueId v : n.inputs) {
          if (g_.value(v).constant) return unsupported(where + "concat of a constant");
          KILN_ASSIGN_OR_RETURN(int a, activation(v));
          ins.push_back(as_layout(a, nhwc));
          inner.push_back(shape_numel(vs_.shapes[v]) / std::max<int64_t>(outer, 1));
        }
        const int out = new_val(g_.value(n.outputs[0]).name, out_s, st_, nhwc);
        add_layer(make_concat_layer(outer, inner, storage_bytes(st_)), n.name, ins, {out}, n.origin);
        concat_sites_.push_back({m_->layers.size() - 1, outer, inner, static_cast<int>(storage_bytes(st_))});
        act_[n.outputs[0]] = out;
        return Status::Ok();
      }
      default: return lower_pointwise(n, where);
    }
  }

  Status lower_conv(const ir::Node& n, const std::string& where) {
    const Shape& x = vs_.shapes[n.inputs[0]];
    const auto& wc = g_.value(n.inputs[1]).constant;
    if (x.size() != 4 || !wc || wc->rank() != 4) return unsupported(where + "only 2-D convolutions with constant weights");
    const std::vector<int64_t> k = {wc->dim(2), wc->dim(3)};
    const std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1});
    ConvParams p{};
    if (!symmetric_pads(n, x, k, s, d, &p.pad_h, &p.pad_w)) return unsupported(where + "asymmetric padding");
    const Shape& y = vs_.shapes[n.outputs[0]];
    p.n = x[0]; p.c = x[1]; p.h = x[2]; p.w = x[3];
    p.k = wc->dim(0); p.r = k[0]; p.sk = k[1]; p.oh = y[2]; p.ow = y[3];
    p.stride_h = s[0]; p.stride_w = s[1]; p.dil_h = d[0]; p.dil_w = d[1];
    p.groups = n.attr_int("group", 1);
    p.has_residual = n.op == ir::OpKind::kFusedConv && n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
    p.activation = n.op == ir::OpKind::kFusedConv ? n.attr_string("activation", "") : "";
    p.act_alpha = n.attr_float("act_alpha", 0);
    p.act_beta = n.attr_float("act_beta", 0);
    static const char* const kActivations[] = {"", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid",
                                               "HardSwish", "Silu", "Gelu", "GeluTanh"};
    if (std::find(std::begin(kActivations), std::end(kActivations), p.activation) == std::end(kActivations))
      return unsupported(where + "fused activation '" + p.activation + "'");
    const bool nhwc = nhwc_of(n, low_);
    KILN_ASSIGN_OR_RETURN(int xa, activation(n.inputs[0]));
    xa = as_layout(xa, nhwc);
    Shape w_shape = wc->shape();
    // A channel-padded input (see padded_channels): C grows to Cp, the extra weights are zeros.
    auto padded = padded_from_.find(n.inputs[0]);
    // The filter's channels per group (KRSC keeps C/groups innermost; padding needs one group).
    const int64_t cp = padded != padded_from_.end() ? m_->vals[xa].shape[1] : wc->dim(1);
    if (padded != padded_from_.end()) {
      p.c_unpadded = p.c;
      p.c = cp;
      w_shape[1] = cp;
    }
    const size_t wcount = nhwc ? static_cast<size_t>(wc->dim(0) * k[0] * k[1] * cp) : static_cast<size_t>(wc->numel());
    std::vector<float> w;
    KILN_ASSIGN_OR_RETURN(int wa, upload(g_.value(n.inputs[1]).name, n.inputs[1], wcount, w_shape, nhwc, [&] {
      // Float32 weights are read in place (a plan's weights buffer): no host copy before the
      // layout change / conversion.
      if (wc->dtype() != DataType::kFloat32) w = floats_of(*wc);
      const float* wsrc = wc->dtype() == DataType::kFloat32 ? wc->data<float>() : w.data();
      if (!nhwc) return wsrc;
      // KCRS -> KRSC (C padded to cp with zeros)
      const int64_t K = wc->dim(0), C = wc->dim(1), R = k[0], S = k[1];
      if (wscratch_.size() < wcount) wscratch_.resize(wcount);  // reused across convs (see upload)
      float* t = wscratch_.data();
      if (cp != C) std::fill(t, t + wcount, 0.f);
      parallel_for(K, K * C * R * S, [&](int64_t a0, int64_t a1) {
        for (int64_t a = a0; a < a1; ++a)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t q = 0; q < S; ++q) t[((a * R + r) * S + q) * cp + c] = wsrc[((a * C + c) * R + r) * S + q];
      });
      return static_cast<const float*>(t);
    }));
    const ir::ValueId bv = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
    const Tensor* bc = bv != ir::kNoValue ? g_.value(bv).constant.get() : nullptr;
    if (bv != ir::kNoValue && (!bc || bc->numel() != p.k)) return unsupported(where + "non-constant bias");
    std::vector<float> b;
    KILN_ASSIGN_OR_RETURN(int ba, upload(n.name + ":bias", bv, static_cast<size_t>(p.k), {p.k}, false, [&] {
      b = bc ? floats_of(*bc) : std::vector<float>(static_cast<size_t>(p.k), 0.f);
      return b.data();
    }));
    std::vector<int> ins = {xa, wa, ba};
    if (p.has_residual) {
      KILN_ASSIGN_OR_RETURN(int ra, activation(n.inputs[3]));
      ins.push_back(as_layout(ra, nhwc));
    }
    const int out = new_val(g_.value(n.outputs[0]).name, y, st_, nhwc);
    KILN_ASSIGN_OR_RETURN(auto layer, make_conv_layer(p, st_, nhwc, o_.precision.tf32));
    // In NHWC a 1x1, stride-1, unpadded, ungrouped conv is the GEMM [N*H*W, C] x [C, K]: offer
    // cuBLASLt (bias, residual as C, ReLU epilogue) beside cuDNN and let tuning choose.
    const bool gemm_like = nhwc && p.r == 1 && p.sk == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
                           p.pad_w == 0 && p.groups == 1 && (p.activation.empty() || p.activation == "Relu");
    std::vector<std::pair<TacticSource, std::unique_ptr<Layer>>> impls;
    // In NHWC fp16/bf16, cuDNN's graph API (engine configurations with the epilogue fused) competes
    // with the legacy fused call; the tactic selector keeps the faster per layer.
    if (nhwc && o_.sources.has(TacticSource::kCudnnGraph)) {
      if (auto graph = st_ == StorageType::kF32 ? nullptr
                       : make_conv_graph_layer(p, st_ == StorageType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF))
        impls.emplace_back(TacticSource::kCudnnGraph, std::move(graph));
    }
    if (gemm_like && o_.sources.has(TacticSource::kCublasLt)) {
      GemmParams gp{};
      gp.m = p.n * p.h * p.w;
      gp.k = p.c;
      gp.n = p.k;
      gp.weight_is_nk = true;  // KRSC with R = S = 1 is [K, C]
      gp.has_bias = true;
      gp.relu = p.activation == "Relu";
      gp.has_residual = p.has_residual;
      KILN_ASSIGN_OR_RETURN(auto gemm, make_gemm_layer(gp, st_, o_.precision.tf32));
      impls.emplace_back(TacticSource::kCublasLt, std::move(gemm));
    }
    if (!impls.empty()) {
      impls.insert(impls.begin(), {TacticSource::kCudnn, std::move(layer)});
      layer = make_choice_layer(std::move(impls));
    }
    add_layer(std::move(layer), n.name, ins, {out}, n.origin);
    act_[n.outputs[0]] = out;
    return Status::Ok();
  }

  // Split: views of the input when the parts are contiguous, 256-byte-aligned byte ranges
  // (row-major, every dim before the axis 1); a channel split of an NHWC activation runs as one
  // copy layer in NHWC (outer = N*H*W) and its parts stay NHWC; else strided row-major copies.


  Status lower_gemm(const ir::Node& n, const std::string& where) {
    const Shape& a = vs_.shapes[n.inputs[0]];
    const auto& wc = g_.value(n.inputs[1]).constant;
    if (!wc || wc->rank() != 2 || a.size() < 2) return unsupported(where + "GEMM needs a constant 2-D weight");
    GemmParams p{};
    const bool gemm = n.op == ir::OpKind::kGemm;
    // MatMulBias (A [*, M, K] of rank > 2): the leading dims fold into M, the bias is the epilogue's.
    const bool mm_bias = n.op == ir::OpKind::kMatMulBias;
    if (gemm && (n.attr_int("transA", 0) != 0 || a.size() != 2)) return unsupported(where + "transA");
    p.weight_is_nk = gemm && n.attr_int("transB", 0) != 0;
    p.k = a.back();
    p.m = p.k > 0 ? shape_numel(a) / p.k : 0;
    p.n = p.weight_is_nk ? wc->dim(0) : wc->dim(1);
    if ((p.weight_is_nk ? wc->dim(1) : wc->dim(0)) != p.k)
      return invalid_argument(where + "inner dims differ: " + shape_str(a) + " x " + shape_str(wc->shape()) +
                              (p.weight_is_nk ? " (transB)" : ""));
    if (mm_bias && (n.inputs.size() < 3 || n.inputs[2] == ir::kNoValue)) return invalid_argument(where + "bias is required");
    std::vector<float> w;
    const float alpha = gemm ? n.attr_float("alpha", 1.f) : 1.f;
    KILN_ASSIGN_OR_RETURN(int wa, upload(g_.value(n.inputs[1]).name, n.inputs[1], static_cast<size_t>(wc->numel()),
                                         wc->shape(), false, [&] {
                                           w = floats_of(*wc);
                                           for (float& v : w) v *= alpha;
                                           return w.data();
                                         }));
    std::vector<int> ins;
    KILN_ASSIGN_OR_RETURN(int xa, activation(n.inputs[0]));
    ins = {as_layout(xa, false), wa};
    if ((gemm || mm_bias) && n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
      const auto& bc = g_.value(n.inputs[2]).constant;
      if (!bc || bc->numel() != p.n) return unsupported(where + "bias must be a constant vector of N");
      std::vector<float> b;
      const float beta = n.attr_float("beta", 1.f);
      KILN_ASSIGN_OR_RETURN(int ba, upload(n.name + ":bias", n.inputs[2], static_cast<size_t>(p.n), {p.n}, false, [&] {
        b = floats_of(*bc);
        for (float& v : b) v *= beta;
        return b.data();
      }));
      ins.push_back(ba);
      p.has_bias = true;
    }
    const int out = new_val(g_.value(n.outputs[0]).name, vs_.shapes[n.outputs[0]], st_, false);
    KILN_ASSIGN_OR_RETURN(auto layer, make_gemm_layer(p, st_, o_.precision.tf32));
    add_layer(std::move(layer), n.name, ins, {out}, n.origin);
    act_[n.outputs[0]] = out;
    return Status::Ok();
  }

  // A pointwise layer's output is NHWC when any 4-D activation input is (and it is 4-D itself).
  bool pointwise_nhwc(const std::vector<ir::ValueId>& inputs, const Shape& out_s) {
    bool out_nhwc = false;
    for (const ir::ValueId v : inputs) {
      if (v == ir::kNoValue || g_.value(v).constant || act_.find(v) == act_.end()) continue;
      const GVal& gv = m_->vals[act_[v]];
      out_nhwc |= gv.nhwc && out_s.size() == 4 && gv.shape.size() == 4 && !layout_free(gv.shape);
    }
    return out_nhwc;
  }

  // Element strides of a dense operand of physical shape `phys` (the output's rank), 0 where it broadcasts.
  static void broadcast_strides(const Shape& phys, int rank, int64_t* strides) {
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; --i) {
      strides[i] = phys[i] == 1 ? 0 : stride;
      stride *= phys[i];
    }
  }

  // FusedPointwise: the program runs per output element; inputs follow the output's layout
  // (NHWC when an input is), constants are uploaded in that order, like lower_pointwise.
  Status lower_fused_pointwise(const ir::Node& n, const std::string& where) {
    auto prog = ir::parse_pw_program(n.attr_string("program", ""));
    if (!prog.ok()) return unsupported(where + prog.status().message());
    if (prog->num_inputs != static_cast<int>(n.inputs.size()) || n.inputs.size() > static_cast<size_t>(ir::kMaxPwInputs))
      return unsupported(where + "the program reads " + std::to_string(prog->num_inputs) + " inputs, the layer has " +
                         std::to_string(n.inputs.size()));
    const Shape& out_s = vs_.shapes[n.outputs[0]];
    if (out_s.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above 6");
    bool out_nhwc = pointwise_nhwc(n.inputs, out_s);
    if (laid_out_ && n.has_attr("layout")) out_nhwc = nhwc_of(n, false) && out_s.size() == 4 && !layout_free(out_s);
    PwDeviceProgram p;
    p.rank = static_cast<int>(out_s.size());
    const Shape phys_out = (out_nhwc && out_s.size() == 4) ? Shape{out_s[0], out_s[2], out_s[3], out_s[1]} : out_s;
    for (int i = 0; i < p.rank; ++i) p.out_dims[i] = phys_out[i];
    std::vector<int> ins;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k] == ir::kNoValue) return unsupported(where + "omitted input " + std::to_string(k));
      Shape phys;
      KILN_ASSIGN_OR_RETURN(int a, pointwise_operand(n.inputs[k], out_s, out_nhwc, &phys));
      ins.push_back(a);
      broadcast_strides(phys, p.rank, p.in_strides[k]);
    }
    if (p.rank == 0) {  // scalar: one element
      p.rank = 1;
      p.out_dims[0] = 1;
    }
    p.num_inputs = static_cast<int>(ins.size());
    p.num_instrs = static_cast<int>(prog->instrs.size());
    for (int j = 0; j < p.num_instrs; ++j) {
      const ir::PwInstr& in = prog->instrs[j];
      PwDeviceInstr& d = p.instrs[j];
      d.op = static_cast<int32_t>(in.op);
      for (int q = 0; q < ir::kMaxPwArgs; ++q) {
        d.src[q] = kPwImmediate;
        d.imm[q] = 0.f;
        if (q >= ir::pw_arity(in.op)) continue;
        const ir::PwOperand& o = in.args[q];
        switch (o.kind) {
          case ir::PwOperand::Kind::kInput: d.src[q] = -1 - o.index; break;
          case ir::PwOperand::Kind::kRegister: d.src[q] = o.index; break;
          case ir::PwOperand::Kind::kImmediate: d.imm[q] = o.imm; break;
        }
      }
    }
    const int out = new_val(g_.value(n.outputs[0]).name, out_s, st_, out_nhwc);
    add_layer(make_fused_pointwise_layer(p, st_), n.name, ins, {out}, n.origin);
    act_[n.outputs[0]] = out;
    return Status::Ok();
  }

  Status lower_pointwise(const ir::Node& n, const std::string& where) {
    PointwiseOp op;
    float alpha = 0, beta = 0;
    bool binary = false;
    switch (n.op) {
      case ir::OpKind::kAdd: op = PointwiseOp::kAdd; binary = true; break;
      case ir::OpKind::kSub: op = PointwiseOp::kSub; binary = true; break;
      case ir::OpKind::kMul: op = PointwiseOp::kMul; binary = true; break;
      case ir::OpKind::kDiv: op = PointwiseOp::kDiv; binary = true; break;
      case ir::OpKind::kPow: op = PointwiseOp::kPow; binary = true; break;
      case ir::OpKind::kRelu: op = PointwiseOp::kRelu; break;
      case ir::OpKind::kSigmoid: op = PointwiseOp::kSigmoid; break;
      case ir::OpKind::kTanh: op = PointwiseOp::kTanh; break;
      case ir::OpKind::kErf: op = PointwiseOp::kErf; break;
      case ir::OpKind::kExp: op = PointwiseOp::kExp; break;
      case ir::OpKind::kSqrt: op = PointwiseOp::kSqrt; break;
      case ir::OpKind::kNeg: op = PointwiseOp::kNeg; break;
      case ir::OpKind::kAbs: op = PointwiseOp::kAbs; break;
      case ir::OpKind::kReciprocal: op = PointwiseOp::kReciprocal; break;
      case ir::OpKind::kLog: op = PointwiseOp::kLog; break;
      case ir::OpKind::kHardSwish: op = PointwiseOp::kHardSwish; break;
      case ir::OpKind::kGelu:
        op = n.attr_string("approximate", "none") == "tanh" ? PointwiseOp::kGeluTanh : PointwiseOp::kGeluErf;
        break;
      case ir::OpKind::kLeakyRelu: op = PointwiseOp::kLeakyRelu; alpha = n.attr_float("alpha", 0.01f); break;
      case ir::OpKind::kElu: op = PointwiseOp::kElu; alpha = n.attr_float("alpha", 1.f); break;
      case ir::OpKind::kHardSigmoid:
        op = PointwiseOp::kHardSigmoid;
        alpha = n.attr_float("alpha", 0.2f);
        beta = n.attr_float("beta", 0.5f);
        break;
      case ir::OpKind::kClip: {
        op = PointwiseOp::kClip;
        alpha = -INFINITY;
        beta = INFINITY;
        if (n.opset < 11) {
          alpha = n.attr_float("min", alpha);
          beta = n.attr_float("max", beta);
        } else {
          for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
            if (n.inputs[k] == ir::kNoValue) continue;
            const auto& c = g_.value(n.inputs[k]).constant;
            if (!c) return unsupported(where + "Clip bounds must be constants");
            (k == 1 ? alpha : beta) = static_cast<float>(load_as_double(c->dtype(), c->raw(), 0));
          }
        }
        break;
      }
      default: return unsupported(where + "no CUDA tactic for this op");
    }
    const Shape& out_s = vs_.shapes[n.outputs[0]];
    if (out_s.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above 6");
    // NHWC when any 4-D activation input is NHWC.
    bool out_nhwc = false;
    for (size_t k = 0; k < (binary ? 2u : 1u); ++k) {
      const ir::ValueId v = n.inputs[k];
      if (g_.value(v).constant || act_.find(v) == act_.end()) continue;
      const GVal& gv = m_->vals[act_[v]];
      out_nhwc |= gv.nhwc && out_s.size() == 4 && gv.shape.size() == 4 && !layout_free(gv.shape);
    }
    if (laid_out_ && n.has_attr("layout")) out_nhwc = nhwc_of(n, false) && out_s.size() == 4 && !layout_free(out_s);
    BroadcastDesc d;
    d.rank = static_cast<int>(out_s.size());
    const Shape phys_out = (out_nhwc && out_s.size() == 4) ? Shape{out_s[0], out_s[2], out_s[3], out_s[1]} : out_s;
    for (int i = 0; i < d.rank; ++i) d.out_dims[i] = phys_out[i];
    std::vector<int> ins;
    for (size_t k = 0; k < (binary ? 2u : 1u); ++k) {
      Shape phys;
      KILN_ASSIGN_OR_RETURN(int a, pointwise_operand(n.inputs[k], out_s, out_nhwc, &phys));
      ins.push_back(a);
      int64_t stride = 1;
      int64_t* strides = k == 0 ? d.a_strides : d.b_strides;
      for (int i = d.rank - 1; i >= 0; --i) {
        strides[i] = phys[i] == 1 ? 0 : stride;
        stride *= phys[i];
      }
    }
    if (d.rank == 0) {  // scalar: one element
      d.rank = 1;
      d.out_dims[0] = 1;
    }
    const int out = new_val(g_.value(n.outputs[0]).name, out_s, st_, out_nhwc);
    add_layer(make_pointwise_layer(op, d, st_, alpha, beta), n.name, ins, {out}, n.origin);
    m_->layers.back()->op = ir::op_name(n.op);
    act_[n.outputs[0]] = out;
    return Status::Ok();
  }

  // ---- transformer / data-movement ops (gpu_ops.h): row-major operands, outputs in storage dtype.
  bool has_2d_weight(const ir::Node& n) const {
    const auto& c = g_.value(n.inputs[1]).constant;
    return c && c->rank() == 2 && vs_.shapes[n.inputs[0]].size() >= 2;
  }

  // An input in row-major order: a constant uploaded in the storage dtype, or the activation
  // (reformatted out of NHWC first).
  StatusOr<int> row_major_operand(ir::ValueId v) override {
    if (const auto& c = g_.value(v).constant) {
      std::vector<float> f;
      return upload(g_.value(v).name, v, static_cast<size_t>(c->numel()), c->shape(), false, [&] {
        f = floats_of(*c);
        return f.data();
      });
    }
    KILN_ASSIGN_OR_RETURN(int a, activation(v));
    return as_layout(a, false);
  }

  int new_output(const ir::Node& n, size_t k = 0) override {
    const int out = new_val(g_.value(n.outputs[k]).name, vs_.shapes[n.outputs[k]], st_, false);
    act_[n.outputs[k]] = out;
    return out;
  }

  int elem_bytes() const { return storage_bytes(st_); }

  bool has_constant_input(const ir::Node& n) const {
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue && g_.value(v).constant) return true;
    return false;
  }

  // Concat with constant parts (the ViT class token once the batch is concrete): the
  // constants are uploaded row-major and copied like any other part.
  Status lower_concat_with_constants(const ir::Node& n, const std::string& where) {
    const Shape& out_s = vs_.shapes[n.outputs[0]];
    int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(out_s.size());
    if (axis < 0 || axis >= static_cast<int64_t>(out_s.size())) return invalid_argument(where + "axis out of range");
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= out_s[i];
    std::vector<int> ins;
    std::vector<int64_t> inner;
    for (ir::ValueId v : n.inputs) {
      KILN_ASSIGN_OR_RETURN(int a, row_major_operand(v));
      ins.push_back(a);
      inner.push_back(shape_numel(vs_.shapes[v]) / std::max<int64_t>(outer, 1));
    }
    add_layer(make_concat_layer(outer, inner, elem_bytes()), n.name, ins, {new_output(n)}, n.origin);
    return Status::Ok();
  }

  Status lower_matmul(const ir::Node& n, const std::string& where) {
    KILN_ASSIGN_OR_RETURN(BatchedMatMulParams p, plan_batched_matmul(n, vs_.shapes[n.inputs[0]], vs_.shapes[n.inputs[1]],
                                                                     vs_.shapes[n.outputs[0]]));
    KILN_ASSIGN_OR_RETURN(int a, row_major_operand(n.inputs[0]));
    KILN_ASSIGN_OR_RETURN(int b, row_major_operand(n.inputs[1]));
    KILN_ASSIGN_OR_RETURN(auto layer, make_batched_matmul_layer(p, st_, o_.precision.tf32));
    add_layer(std::move(layer), n.name, {a, b}, {new_output(n)}, n.origin);
    return Status::Ok();
  }

  // LayerNormalization over the axes [axis, rank): rows x cols with scale (and bias) of cols elements.

  // RMSNormalization (gpu_transformer.h): rows x cols, scale of cols values or one.

  // Attention (gpu_transformer.h): Q, K, V and the mask row-major in the storage type (a bool
  // mask as 0/1); the scores of at most 64 MiB (or half the workspace limit) per chunk of heads.
  Status lower_attention(const ir::Node& n, const std::string& where) {
    const size_t scratch_limit = std::min<size_t>(64u << 20, o_.workspace_limit / 2);
    KILN_ASSIGN_OR_RETURN(AttentionPlan p, plan_attention(n, vs_, elem_bytes(), scratch_limit));
    std::vector<int> ins;
    for (size_t k = 0; k < n.inputs.size() && k < 4; ++k) {
      if (n.inputs[k] == ir::kNoValue) continue;  // the optional mask
      KILN_ASSIGN_OR_RETURN(int a, row_major_operand(n.inputs[k]));
      ins.push_back(a);
    }
    KILN_ASSIGN_OR_RETURN(auto layer, make_attention_layer(p, st_, o_.precision.tf32));
    add_layer(std::move(layer), n.name, ins, {new_output(n)}, n.origin);
    return Status::Ok();
  }

  // Transpose, Slice and Expand: one strided copy.

  // Split as strided copies of the row-major input, one layer per output.

  Status lower_gather(const ir::Node& n, const std::string& where) {
    if (n.inputs.size() < 2) return invalid_argument(where + "indices are required");
    KILN_ASSIGN_OR_RETURN(GatherPlan p, plan_gather(n, g_, vs_.shapes[n.inputs[0]], vs_.shapes[n.inputs[1]],
                                                    vs_.dtypes[n.inputs[1]]));
    KILN_ASSIGN_OR_RETURN(int x, row_major_operand(n.inputs[0]));
    if (p.runtime) {  // indices from an integer activation (plan_gather checked the dtype): token ids
      KILN_ASSIGN_OR_RETURN(int idx, activation(n.inputs[1]));
      add_layer(make_gather_layer(p, elem_bytes()), n.name, {x, idx}, {new_output(n)}, n.origin);
      return Status::Ok();
    }
    // The normalized indices as an int64 weight (the GVal's dtype fields do not describe it;
    // only the gather layer reads it).
    const int idx = new_val(n.name + ":indices", {static_cast<int64_t>(p.indices.size())}, StorageType::kF32, false);
    const size_t bytes = p.indices.size() * sizeof(int64_t);
    if (dry_run_) {
      m_->vals[idx].weight = &dry_run_;
      add_layer(make_gather_layer(p, elem_bytes()), n.name, {x, idx}, {new_output(n)}, n.origin);
      return Status::Ok();
    }
    KILN_ASSIGN_OR_RETURN(void* dev, device_copy(p.indices.data(), bytes, "gather indices of '" + n.name + "'"));
    m_->vals[idx].weight = dev;
    m_->weights += bytes;
    add_layer(make_gather_layer(p, elem_bytes()), n.name, {x, idx}, {new_output(n)}, n.origin);
    return Status::Ok();
  }




  // Where(cond, a, b) with broadcasting; the bool condition must be a constant (uploaded as 0/1).

  // Cast between float types: a view, except float32 storage of a float16 result (rounded).
  // Cast from an int32/int64 activation (attention masks): converted to the float storage.

  const ir::Graph& g_;
  const ValueShapes& vs_;
  GpuBuildOptions o_;
  GpuModel::Impl* m_;
  StorageType plan_st_;  // the plan's storage (GpuBuildOptions::storage)
  StorageType st_;       // storage of the layer being lowered: its activations and weights
  bool low_;             // st_ is fp16/bf16: 4-D activations NHWC (without assign_layouts' attributes)
  bool convert_inputs_ = false;  // activation() converts float inputs to st_
  std::map<std::pair<int, StorageType>, int> converted_;
  std::vector<float> wscratch_;     // a conv's weights in KRSC order, before upload
  std::vector<uint16_t> hscratch_;  // a weight in fp16/bf16, before upload
  std::map<ir::ValueId, int64_t> padded_from_;  // graph inputs stored channel-padded -> their real C
  std::map<ir::ValueId, int> act_;
  std::map<std::pair<int, bool>, int> reformatted_;
  bool laid_out_ = false;  // the graph carries assign_layouts' decisions
  bool dry_run_ = false;
  const ir::Node* cur_node_ = nullptr;  // the layer being lowered (packed weights are keyed by it)
  std::map<std::string, double> trace_ms_;  // with a logger: lowering ms per op kind
  struct ConcatSite {
    size_t layer;                // index into m_->layers
    int64_t outer;               // product of the physical dims before the concat axis
    std::vector<int64_t> inner;  // elements of each input per outer index
    int elem_bytes;
  };
  std::vector<ConcatSite> concat_sites_;

 public:
  // Concat elimination (docs/decisions/0009-concat-elimination.md). Input i of a Concat becomes
  // an alias of bytes [o_i, o_i + |input i|) of the output when the slices are contiguous
  // (outer == 1), o_i is a multiple of 256 (the arena's alignment, which cuDNN and cuBLASLt
  // kernels may rely on), and the input is an arena value of its own (no alias, weight, graph
  // input or output) that exactly one layer writes, or the output of a Concat eliminated before,
  // appearing once in this Concat. Its producer then writes straight into the slice; the Concat
  // copies only the other inputs and leaves the layer list when none is left.
  void eliminate_concats() {
    std::vector<int> writers(m_->vals.size(), 0);
    for (const auto& l : m_->layers)
      for (int v : l->outs)
        if (v >= 0) ++writers[v];
    std::vector<bool> pinned(m_->vals.size(), false), gone_out(m_->vals.size(), false);
    for (int v : m_->input_vals) pinned[v] = true;
    for (int v : m_->output_vals) pinned[v] = true;
    std::vector<bool> drop(m_->layers.size(), false);
    for (const ConcatSite& c : concat_sites_) {
      Layer& l = *m_->layers[c.layer];
      if (c.outer != 1) continue;
      const int out = l.outs[0];
      int64_t off = 0;
      size_t kept = 0;
      for (size_t i = 0; i < l.ins.size(); ++i) {
        const int v = l.ins[i];
        const int64_t bytes = c.inner[i] * c.elem_bytes;
        GVal& gv = m_->vals[v];
        const bool ok = off % 256 == 0 && v != out && !pinned[v] && gv.alias_of < 0 && !gv.weight &&
                        gv.type == m_->vals[out].type && static_cast<int64_t>(gv.bytes()) == bytes &&
                        (writers[v] == 1 || (writers[v] == 0 && gone_out[v])) &&
                        std::count(l.ins.begin(), l.ins.end(), v) == 1;
        if (ok) {
          gv.alias_of = out;
          gv.alias_offset = off;
          l.ins[i] = -1;
        } else {
          ++kept;
        }
        off += bytes;
      }
      if (kept == 0) {
        drop[c.layer] = true;
        gone_out[out] = true;
        m_->eliminated.push_back(l.name);
      } else if (kept < l.ins.size()) {
        l.tactic = "kiln.concat (" + std::to_string(l.ins.size() - kept) + " of " + std::to_string(l.ins.size()) +
                   " inputs in place)";
      }
    }
    std::vector<std::unique_ptr<Layer>> layers;
    for (size_t i = 0; i < m_->layers.size(); ++i)
      if (!drop[i]) layers.push_back(std::move(m_->layers[i]));
    m_->layers = std::move(layers);
  }
};

// The stream plan (streams.h) and the activation arena: first-fit offsets from live ranges,
// widened over parallel regions so that layers that may run concurrently never share bytes;
// with one stream this is the sequential plan. The checker re-proves that on the final offsets.
Status plan_streams_and_memory(GpuModel::Impl* m) {
  std::vector<StreamValue> vals;
  vals.reserve(m->vals.size());
  for (const GVal& v : m->vals) vals.push_back({v.bytes(), v.alias_of, v.alias_offset, v.weight == nullptr});
  std::vector<StreamLayer> layers;
  layers.reserve(m->layers.size());
  for (const auto& l : m->layers) layers.push_back({l->ins, l->outs});
  const int max_aux = m->opts.max_aux_streams < 0 ? kAutoAuxStreams : m->opts.max_aux_streams;
  if (max_aux > kMaxAuxStreams)
    return invalid_argument("max_aux_streams " + std::to_string(max_aux) + ": at most " + std::to_string(kMaxAuxStreams));
  m->streams = assign_streams(vals, layers, max_aux);
  const ArenaPlan a = plan_arena(vals, layers, m->input_vals, m->output_vals, m->streams);
  for (size_t v = 0; v < m->vals.size(); ++v)
    if (a.offset[v] >= 0) m->vals[v].offset = a.offset[v];
  m->arena = a.bytes;
  m->act_sum = a.activation_sum;
  const std::string conflict = find_arena_conflict(vals, layers, a.offset, m->streams);
  if (!conflict.empty()) return internal_error("aux streams: " + conflict);
  return Status::Ok();
}

}  // namespace

Status check_gpu_support(const ir::Graph& g, const ValueShapes& shapes, bool fp16) {
  return check_gpu_support(g, shapes, fp16 ? StorageType::kF16 : StorageType::kF32);
}

Status check_gpu_support(const ir::Graph& g, const ValueShapes& shapes, StorageType storage) {
  if (storage_is_int(storage))
    return invalid_argument(std::string("check_gpu_support: ") + storage_name(storage) + " is not a float storage type");
  GpuModel::Impl scratch;
  GpuBuildOptions o;
  o.tune = false;
  o.precision.fp16 = storage == StorageType::kF16;
  o.precision.bf16 = storage == StorageType::kBF16;
  ir::Graph folded = g;
  KILN_RETURN_IF_ERROR(fold_shape_computations(folded, shapes));
  Lowering l(folded, shapes, o, &scratch);
  l.dry_run();
  return l.run();
}

StatusOr<GpuStreamSummary> plan_gpu_streams(const ir::Graph& g, const ValueShapes& shapes, const GpuBuildOptions& opts) {
  GpuModel::Impl scratch;
  scratch.opts = opts;
  scratch.opts.tune = false;
  ir::Graph folded = g;
  KILN_RETURN_IF_ERROR(fold_shape_computations(folded, shapes));
  Lowering l(folded, shapes, scratch.opts, &scratch);
  l.dry_run();
  KILN_RETURN_IF_ERROR(l.run());
  l.eliminate_concats();
  KILN_RETURN_IF_ERROR(plan_streams_and_memory(&scratch));
  GpuStreamSummary r;
  for (const auto& layer : scratch.layers) r.layers.push_back(layer->name);
  r.streams = scratch.streams.stream;
  r.aux_streams = scratch.streams.aux_streams;
  r.arena_bytes = scratch.arena;
  return r;
}


GpuModel::~GpuModel() = default;
GpuContext::~GpuContext() = default;

StatusOr<std::shared_ptr<GpuModel>> GpuModel::create(const ir::Graph& g, const ValueShapes& shapes,
                                                     const GpuBuildOptions& opts) {
  auto model = std::shared_ptr<GpuModel>(new GpuModel());
  model->impl_ = std::make_unique<Impl>();
  Impl* m = model->impl_.get();
  m->opts = opts;
  const auto t0 = std::chrono::steady_clock::now();
  const bool trace = static_cast<bool>(opts.logger);
  auto tp = t0;
  auto step = [&](const char* what) {
    if (!trace) return;
    const auto now = std::chrono::steady_clock::now();
    char line[96];
    std::snprintf(line, sizeof line, "[load] %-22s %8.1f ms", what, std::chrono::duration<double, std::milli>(now - tp).count());
    opts.logger(LogSeverity::kVerbose, line);
    tp = now;
  };
  ir::Graph folded = g;  // shape computations become constants at these concrete shapes
  KILN_RETURN_IF_ERROR(fold_shape_computations(folded, shapes));
  step("copy + fold shapes");
  Lowering l(folded, shapes, opts, m);
  KILN_RETURN_IF_ERROR(l.run());
  step("lowering");
  if (trace) {
    char line[96];
    std::snprintf(line, sizeof line, "[load]   of which weights %8.1f ms", m->times.weights_ms);
    opts.logger(LogSeverity::kVerbose, line);
  }
  l.eliminate_concats();
  step("concat elimination");
  KILN_RETURN_IF_ERROR(plan_streams_and_memory(m));
  step("streams + arena plan");
  for (const auto& layer : m->layers) layer->finalize(m->vals);
  step("finalize");
  // Tuning scratch: what the layers may use, at most the limit (conv tactics are capped at
  // 256 MiB inside the layer). After tuning the workspace shrinks to what the chosen tactics need.
  size_t ws = 256u << 20;
  for (const auto& layer : m->layers) ws = std::max(ws, layer->workspace());
  m->workspace = std::max<size_t>(std::min(ws, opts.workspace_limit), 256);
  const auto t1 = std::chrono::steady_clock::now();
  {
    // Every layer is set up on the device: a plan's tactic, tuning, or (no tuning) a check that
    // the default tactic runs here, which may switch a layer to its fallback path.
    KILN_ASSIGN_OR_RETURN(auto ctx, model->create_context());
    step("context (arena, handles)");
    std::map<std::string, double> select_ms;  // with a logger: set-up time per tactic source
    cudaStream_t s;
    KILN_CUDA_CHECK(cudaStreamCreate(&s));
    ExecState st = ctx->impl_->state(s);
    st.tactic_data = opts.tactic_data;
    // Cold-L2 timing: a scratch buffer of twice the L2 size, written before each timed run.
    void* flush = nullptr;
    if (opts.tune && opts.select_tactic && opts.cold_l2_timing) {
      int dev = 0, l2 = 0;
      if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) == cudaSuccess &&
          l2 > 0) {
        const size_t bytes = 2 * static_cast<size_t>(l2);
        KILN_RETURN_IF_ERROR(device_alloc(&flush, bytes, "the L2 flush buffer of tactic timing"));
        st.l2_flush = flush;
        st.l2_flush_bytes = bytes;
      }
    }
    struct FreeFlush {
      void* p;
      ~FreeFlush() { if (p) cudaFree(p); }
    } free_flush{flush};
    Status ms = cuda_status(cudaMemsetAsync(ctx->impl_->arena, 0, std::max<size_t>(m->arena, 1), s), "cudaMemsetAsync",
                            __FILE__, __LINE__);
    const int total = static_cast<int>(m->layers.size());
    for (int i = 0; i < total && ms.ok(); ++i) {
      Layer& layer = *m->layers[i];
      const auto ts = std::chrono::steady_clock::now();
      auto preset = opts.preset_tactics.find(layer.name);
      if (preset != opts.preset_tactics.end() && preset->second.id != kNoTactic) {
        // The plan's tactic: it ran at build on this GPU with these libraries (the plan header
        // checks both), so it is selected without running it.
        st.verify = opts.verify_presets;
        ms = layer.select(preset->second.id, st);
        st.verify = true;
        if (ms.ok()) layer.tuned_ms = preset->second.tuned_ms;
        else if (opts.verify_presets) ms = select_first_that_runs(layer, st, opts.sources);
      } else if (opts.tune && opts.select_tactic) {
        if (opts.on_tune_progress) opts.on_tune_progress(i, total, layer.name);
        TunableCudaLayer tl(layer, st);
        StatusOr<TacticChoice> c = opts.select_tactic(tl);
        ms = c.status();
        if (c.ok()) layer.tuned_ms = c->ms;
      } else {
        ms = select_first_that_runs(layer, st, opts.sources);
      }
      if (!ms.ok()) ms = ms.with_context(std::string(opts.tune ? "tuning" : "setting up") + " layer '" + layer.name + "'");
      if (trace)
        select_ms[tactic_source_name(tactic_id_source(layer.tactic_id))] +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ts).count();
    }
    for (const auto& [src, t] : select_ms) {
      char line[96];
      std::snprintf(line, sizeof line, "[load]   tactics of source %-12s %8.1f ms", src.c_str(), t);
      opts.logger(LogSeverity::kVerbose, line);
    }
    if (ms.ok()) ms = cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize", __FILE__, __LINE__);
    if (opts.on_tune_progress && opts.tune) opts.on_tune_progress(total, total, "");
    cudaStreamDestroy(s);
    KILN_RETURN_IF_ERROR(ms);
  }
  // The workspace limit holds for the chosen tactics (a plan's tactics included).
  size_t need = 0;
  for (const auto& layer : m->layers) {
    if (layer->workspace() > opts.workspace_limit)
      return Status(StatusCode::kOutOfMemory, "layer '" + layer->name + "': tactic '" + layer->tactic + "' needs " +
                                                  std::to_string(layer->workspace()) + " bytes of workspace, " +
                                                  std::to_string(opts.workspace_limit) + " bytes allowed");
    need = std::max(need, layer->workspace());
  }
  m->workspace = std::max<size_t>(need, 256);
  // Each aux stream's workspace holds what its own layers need (the caller's stream keeps the
  // largest, for profile_layers, which runs every layer there).
  m->aux_workspace.assign(static_cast<size_t>(m->streams.aux_streams), 256);
  for (size_t i = 0; i < m->layers.size(); ++i) {
    const int s = m->streams.stream[i];
    if (s > 0) m->aux_workspace[s - 1] = std::max(m->aux_workspace[s - 1], m->layers[i]->workspace());
  }
  for (size_t i = 0; i < m->layers.size(); ++i) {
    const Layer& layer = *m->layers[i];
    m->infos.push_back({layer.name, layer.op, layer.tactic, layer.tactic_id, layer.origin, layer.tuned_ms,
                        layer.fallback, layer.workspace(), m->streams.stream[i]});
  }
  const auto t2 = std::chrono::steady_clock::now();
  m->times.lower_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  m->times.tactics_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  for (const auto& layer : m->layers) m->times.restored += layer->restored ? 1 : 0;
  return model;
}

const std::vector<GpuLayerInfo>& GpuModel::layers() const { return impl_->infos; }
const std::vector<std::string>& GpuModel::eliminated_layers() const { return impl_->eliminated; }
std::vector<Shape> GpuModel::input_shapes() const {
  std::vector<Shape> r;
  for (int v : impl_->input_vals) r.push_back(impl_->vals[v].shape);
  return r;
}
std::vector<DataType> GpuModel::input_dtypes() const {
  std::vector<DataType> r;
  for (int v : impl_->input_vals) r.push_back(storage_host_dtype(impl_->vals[v].type));
  return r;
}
std::vector<Shape> GpuModel::output_shapes() const {
  std::vector<Shape> r;
  for (int v : impl_->output_vals) r.push_back(impl_->vals[v].shape);
  return r;
}
size_t GpuModel::arena_bytes() const { return impl_->arena; }
size_t GpuModel::activation_bytes_sum() const { return impl_->act_sum; }
size_t GpuModel::weight_bytes() const { return impl_->weights; }
const std::map<std::string, std::vector<uint8_t>>& GpuModel::packed_weights() const { return impl_->packed; }
int GpuModel::packed_hits() const { return impl_->packed_hits; }

std::vector<int> GpuModel::elidable_constants(const ir::Graph& g) const {
  std::vector<int> r;
  if (!impl_->opts.record_packed) return r;
  std::vector<std::vector<const ir::Node*>> readers(g.values.size());
  for (const ir::Node& n : g.nodes) {
    if (n.removed) continue;
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) readers[static_cast<size_t>(v)].push_back(&n);
  }
  std::vector<bool> output(g.values.size(), false);
  for (ir::ValueId v : g.outputs) output[static_cast<size_t>(v)] = true;
  for (const ir::Value& v : g.values) {
    const auto& c = v.constant;
    if (!c || output[static_cast<size_t>(v.id)] || c->numel() < kMinElidedElements) continue;
    if (c->dtype() != DataType::kFloat32 && c->dtype() != DataType::kFloat16 && c->dtype() != DataType::kBFloat16)
      continue;
    const auto& rs = readers[static_cast<size_t>(v.id)];
    bool all = !rs.empty();
    for (const ir::Node* n : rs) all &= impl_->packed_uses.count({n->name, v.id}) > 0;
    if (all) r.push_back(v.id);
  }
  return r;
}

std::map<std::string, std::string> GpuModel::tactic_data() const {
  std::map<std::string, std::string> r;
  for (const auto& layer : impl_->layers) layer->export_tactic_data(&r);
  return r;
}
const GpuModel::SetupTimes& GpuModel::setup_times() const { return impl_->times; }
size_t GpuModel::workspace_bytes() const {
  size_t total = impl_->workspace;
  for (size_t w : impl_->aux_workspace) total += w;
  return total;
}
int GpuModel::aux_streams() const { return impl_->streams.aux_streams; }

}  // namespace kiln::cuda
