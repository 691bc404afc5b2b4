// Lowering an optimized ir::Graph to CUDA layers: the LowerContext the op factories lower through
// (layer_factory.h; values, layouts, precision converts, weight upload with the plan's packed
// weights), the plan's Reformat layers, concat elimination, the stream and activation memory plan
// (first-fit offsets from live ranges) and model setup (tactics). The execution
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

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/exact_layers.h"
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

// A lowering in progress: graph inputs staged (and converted / channel-padded), each node lowered
// by its factory through this LowerContext, graph outputs converted back to fp32 row-major.
class Lowering final : public LowerContext {
 public:
  Lowering(const ir::Graph& g, const ValueShapes& vs, const GpuBuildOptions& o, GpuModel::Impl* m)
      : g_(g), vs_(vs), o_(o), m_(m), plan_st_(o.storage()), st_(plan_st_), fst_(plan_st_), low_(st_ != StorageType::kF32) {}
  // Lower without touching the device (weights are not uploaded): for check_gpu_support.
  void dry_run() { dry_run_ = true; }

  // LowerContext (layer_factory.h): what the registered factories use.
  const ir::Graph& graph() const override { return g_; }
  const Shape& shape(ir::ValueId v) const override { return vs_.shapes[v]; }
  StorageType storage() const override { return st_; }
  StorageType float_storage() const override { return fst_; }
  StatusOr<int> operand_as(ir::ValueId v, StorageType t) override {
    if (const auto& c = g_.value(v).constant) return upload_as(g_.value(v).name + ":" + storage_name(t), *c, t);
    auto it = act_.find(v);
    if (it == act_.end()) return unsupported("value '" + g_.value(v).name + "' is not available on the GPU");
    const int a = as_layout(it->second, false, std::string());
    const GVal& gv = m_->vals[a];
    if (gv.type == t) return a;
    auto key = std::make_pair(a, t);
    auto c = converted_.find(key);
    if (c != converted_.end()) return c->second;
    const std::string name = gv.name + ":" + storage_name(t);
    const int out = new_val(name, gv.shape, t, false);
    add_layer(make_cast_layer(shape_numel(gv.shape), gv.type, t), "cast:" + name, {a}, {out}, {});
    converted_[key] = out;
    return out;
  }
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
  const ValueShapes& value_shapes() const override { return vs_; }
  const GpuBuildOptions& options() const override { return o_; }
  const Shape& value_shape(int value) const override { return m_->vals[value].shape; }
  int bound(ir::ValueId v) const override {
    auto it = act_.find(v);
    return it == act_.end() ? -1 : it->second;
  }
  bool channel_padded(ir::ValueId v) const override { return padded_from_.count(v) > 0; }
  float* weight_scratch(size_t count) override {
    if (wscratch_.size() < count) wscratch_.resize(count);
    return wscratch_.data();
  }
  void mark_concat(int64_t outer, std::vector<int64_t> inner, int elem_bytes) override {
    concat_sites_.push_back({m_->layers.size() - 1, outer, std::move(inner), elem_bytes});
  }

  Status run() {
    // A graph through passes::assign_layouts carries each layer's layout ("layout" attribute)
    // and explicit Reformat layers; the lowering follows them. Without it (tests lowering a
    // graph directly), 16-bit storage means NHWC for conv/pool and elementwise layers follow.
    for (const ir::Node& n : g_.nodes) laid_out_ |= !n.removed && n.has_attr("layout");
    KILN_RETURN_IF_ERROR(check_tensor_io(g_));
    KILN_RETURN_IF_ERROR(widen_narrow_integers(g_, &vs_));
    const auto consumers = g_.consumers();
    for (ir::ValueId v : g_.inputs) {
      // Every input is staged in its declared dtype (integer token ids and masks, float32,
      // float16, bfloat16), converted below to the storage its consumers compute in.
      KILN_ASSIGN_OR_RETURN(StorageType in_t, input_storage(g_.value(v).name, vs_.dtypes[v]));
      const int staging = new_val(g_.value(v).name, vs_.shapes[v], in_t, false);
      m_->input_vals.push_back(staging);
      const Shape& s = vs_.shapes[v];
      if (!storage_is_float(in_t)) {
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
      // The internal copy: float32 unless the consumers compute in 16 bits (then the plan's
      // storage, NHWC / channel-padded as they want). A float16 / bfloat16 input is converted
      // there by the same reformat layer; a staging buffer already in that form is used as is.
      const StorageType internal_t = low_in ? st_ : StorageType::kF32;
      // Channel padding for tensor-core convs: the internal copy is [N, Cp, H, W] NHWC.
      const int64_t cp = low_in && nhwc ? padded_channels(v) : 0;
      if (in_t == internal_t && !nhwc) {
        act_[v] = staging;
      } else {
        Shape internal_shape = s;
        if (cp > 0) {
          internal_shape[1] = cp;
          padded_from_[v] = s[1];
        }
        const int internal = new_val(g_.value(v).name + ":internal", internal_shape, internal_t, nhwc);
        add_layer(make_reformat_layer(s, in_t, false, internal_t, nhwc, cp), "input_reformat:" + g_.value(v).name,
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
      // A node with an int32 / int64 / bool output stores its outputs exactly in that type and
      // lowers through the exact factory table (docs/decisions/0051); fst_ stays its float precision.
      fst_ = node_storage(n);
      st_ = fst_;
      exact_ = !n.outputs.empty() && n.outputs[0] != ir::kNoValue && exact_storage(vs_.dtypes[n.outputs[0]], &st_);
      low_ = fst_ != StorageType::kF32;
      convert_inputs_ = !exact_ && !is_int_view(n.op) && n.op != ir::OpKind::kReformat;  // views keep their input's type
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
    st_ = fst_ = plan_st_;
    exact_ = false;
    low_ = st_ != StorageType::kF32;
    for (ir::ValueId v : g_.outputs) {
      if (act_.find(v) == act_.end() && g_.value(v).constant) {
        // An output the build folded to a constant (the Shape of an input, a Constant): uploaded
        // and copied into the output by a cast layer of its own type.
        const Tensor& c = *g_.value(v).constant;
        StorageType t = float_io_storage(c.dtype());
        if (!exact_storage(c.dtype(), &t) && !is_float(c.dtype()))
          return unsupported("graph output '" + g_.value(v).name + "' is a constant of dtype " + dtype_name(c.dtype()));
        KILN_ASSIGN_OR_RETURN(int w, upload_as(g_.value(v).name + ":constant", c, t));
        const int out = new_val(g_.value(v).name, vs_.shapes[v], t, false);
        add_layer(make_cast_layer(c.numel(), t, t), "output_constant:" + g_.value(v).name, {w}, {out}, {});
        m_->output_vals.push_back(out);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(int a, activation(v));
      const GVal& gv = m_->vals[a];
      if (!storage_is_float(gv.type)) {  // int32 / int64 / bool outputs are returned as stored
        if (gv.weight) return unsupported("graph output '" + g_.value(v).name + "' is a constant");
        m_->output_vals.push_back(as_layout(a, false, std::string()));
        continue;
      }
      // A float output is returned row-major in its declared dtype (float32, float16 or bfloat16),
      // whatever the storage its producer computed in.
      const StorageType out_t = float_io_storage(vs_.dtypes[v]);
      if (gv.type == out_t && (layout_free(gv.shape) || !gv.nhwc) && gv.weight == nullptr) {
        m_->output_vals.push_back(a);
        continue;
      }
      const int out = new_val(g_.value(v).name, vs_.shapes[v], out_t, false);
      if (gv.weight) return unsupported("graph output '" + g_.value(v).name + "' is a constant");
      add_layer(make_reformat_layer(gv.shape, gv.type, gv.nhwc && !layout_free(gv.shape), out_t, false),
                "output_reformat:" + g_.value(v).name, {a}, {out}, {});
      m_->output_vals.push_back(out);
    }
    return Status::Ok();
  }

 private:
  // Whether factory_conv.cc's 2-D path (not the Nd one) takes Conv / FusedConv `n`: a constant 4-D
  // weight, a constant bias or none, symmetric pads.
  bool takes_2d_conv_path(const ir::Node& n) const {
    const auto& w = g_.value(n.inputs[1]).constant;
    if (!w || w->rank() != 4 || vs_.shapes[n.inputs[0]].size() != 4) return false;
    if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue && !g_.value(n.inputs[2]).constant) return false;
    int64_t ph = 0, pw = 0;
    return symmetric_pads(n, vs_.shapes[n.inputs[0]], {w->dim(2), w->dim(3)}, n.attr_ints("strides", {1, 1}),
                          n.attr_ints("dilations", {1, 1}), &ph, &pw);
  }

  // Channels to pad graph input `v` to (0 = none): fp16/bf16, rank 4, C % 8 != 0, and every
  // consumer a 2-D convolution with one group reading it as its data input (not a graph output)
  // that the 2-D conv path takes (only it pads the weights).
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
        if (!conv || k != 0 || n.attr_int("group", 1) != 1 || !takes_2d_conv_path(n)) return 0;
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
    if (!convert_inputs_ || !storage_is_float(gv.type) || !storage_is_float(st_) || gv.type == st_ || gv.weight) return a;
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
    // A copy: new_val below may grow m_->vals, which would leave a reference dangling.
    const GVal v = m_->vals[gv];
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
                       const std::function<const float*()>& make) override {
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
    if (o_.record_packed) {
      record_packed(key, layer, src, host, bytes);
      if (o_.weight_cache) o_.weight_cache->remember_packed(key, p);
    }
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

  // An operand of a pointwise layer: an activation in the output's layout or a constant
  // uploaded in the output's physical order, broadcast-padded to the output rank.
  StatusOr<int> pointwise_operand(ir::ValueId v, const Shape& out, bool out_nhwc, Shape* phys) override {
    Shape s = vs_.shapes[v];
    while (s.size() < out.size()) s.insert(s.begin(), 1);
    *phys = (out_nhwc && s.size() == 4) ? Shape{s[0], s[2], s[3], s[1]} : s;
    if (!storage_is_float(st_)) {  // exact types are row-major
      *phys = s;
      return operand_as(v, st_);
    }
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

  // One node: the checks every layer shares, then the plan's own Reformat layers here and every
  // other op through its registered factory (layer_factory.h): a node with int32 / int64 / bool
  // outputs (exact_) through the exact table, whose factories check their operands; a node with
  // float outputs through the float table, integer / bool activations reaching it only where
  // check_int_operands allows.
  Status lower(const ir::Node& n) {
    const std::string where = n.describe() + ": ";
    if (n.op == ir::OpKind::kReformat) return lower_reformat(n);
    if (exact_) {
      StorageType t;
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const ir::ValueId v = n.outputs[k];
        // DynamicQuantizeLinear's y_scale (float32) is the one float output of an exact node.
        if (n.op == ir::OpKind::kDynamicQuantizeLinear && k == 1) continue;
        if (v != ir::kNoValue && !exact_storage(vs_.dtypes[v], &t))
          return unsupported(where + std::string("output dtype ") + dtype_name(vs_.dtypes[v]) + " beside " +
                             dtype_name(vs_.dtypes[n.outputs[0]]));
      }
      if (LayerFactory f = find_exact_layer_factory(n.op)) return f(*this, n, where);
      return unsupported(where + "no CUDA tactic for " + dtype_name(vs_.dtypes[n.outputs[0]]) + " outputs of this op");
    }
    std::vector<bool> int_in;
    for (ir::ValueId v : n.inputs) int_in.push_back(act_.count(v) && !storage_is_float(m_->vals[act_.at(v)].type));
    // A QuantConv's X may be the 8-bit codes another QuantConv wrote (docs/decisions/0081).
    if (n.op == ir::OpKind::kQuantConv && !int_in.empty()) int_in[0] = false;
    KILN_RETURN_IF_ERROR(check_int_operands(n, int_in));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ir::ValueId v = n.outputs[k];
      // The non-float outputs a float layer writes: Dropout's mask (output 1, bool since opset
      // 10; factory_view.cc), MaxPool's Indices (output 1, int64; factory_pool.cc), TopK's
      // indices (output 1, int64) and Unique's indices / inverse / counts (int64; factory_select.cc).
      if (v == ir::kNoValue) continue;
      const bool pool_indices = n.op == ir::OpKind::kMaxPool && k == 1 && vs_.dtypes[v] == DataType::kInt64;
      const bool dropout_mask = n.op == ir::OpKind::kDropout && k == 1 && vs_.dtypes[v] == DataType::kBool;
      const bool topk_indices = n.op == ir::OpKind::kTopK && k == 1 && vs_.dtypes[v] == DataType::kInt64;
      const bool unique_ints = n.op == ir::OpKind::kUnique && k >= 1 && vs_.dtypes[v] == DataType::kInt64;
      // QuantConv's 8-bit output: the next QuantConv's X codes (docs/decisions/0081).
      const bool quant_codes = n.op == ir::OpKind::kQuantConv && k == 0 &&
                               (vs_.dtypes[v] == DataType::kInt8 || vs_.dtypes[v] == DataType::kFloat8E4M3FN);
      if (!is_float(vs_.dtypes[v]) && !pool_indices && !dropout_mask && !topk_indices && !unique_ints && !quant_codes)
        return unsupported(where + std::string("output dtype ") + dtype_name(vs_.dtypes[v]));
    }
    if (LayerFactory f = find_layer_factory(n.op)) return f(*this, n, where);
    return unsupported(where + "no CUDA tactic for this op");
  }

  // Constant `c` uploaded as a new weight value `name` in exact storage `t` (row-major, not
  // packed in the plan: the constant stays in the graph), element by element: integers exactly
  // (int64 included), floats rounded to fp16 / bf16, anything nonzero as bool true.
  StatusOr<int> upload_as(const std::string& name, const Tensor& c, StorageType t) {
    const ScopedMs timer(&m_->times.weights_ms);
    const int64_t n = c.numel();
    const size_t eb = static_cast<size_t>(storage_bytes(t));
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * eb);
    const bool int_src = c.dtype() == DataType::kInt64 || c.dtype() == DataType::kInt32 || c.dtype() == DataType::kBool;
    for (int64_t i = 0; i < n; ++i) {
      const double d = c.dtype() == DataType::kInt64 ? 0.0 : load_as_double(c.dtype(), c.raw(), i);
      const int64_t k = c.dtype() == DataType::kInt64 ? c.data<int64_t>()[i] : (int_src ? static_cast<int64_t>(d) : 0);
      uint8_t* p = bytes.data() + static_cast<size_t>(i) * eb;
      switch (t) {
        case StorageType::kF32: {
          const float f = int_src ? static_cast<float>(k) : static_cast<float>(d);
          std::memcpy(p, &f, 4);
          break;
        }
        case StorageType::kF16: case StorageType::kBF16: {
          const float f = int_src ? static_cast<float>(k) : static_cast<float>(d);
          const uint16_t h = t == StorageType::kF16 ? float_to_fp16(f) : float_to_bf16(f);
          std::memcpy(p, &h, 2);
          break;
        }
        case StorageType::kI32: {
          const auto v = static_cast<int32_t>(int_src ? k : static_cast<int64_t>(d));
          std::memcpy(p, &v, 4);
          break;
        }
        case StorageType::kI64: {
          const int64_t v = int_src ? k : static_cast<int64_t>(d);
          std::memcpy(p, &v, 8);
          break;
        }
        case StorageType::kBool: *p = (int_src ? k != 0 : d != 0.0) ? 1 : 0; break;
        case StorageType::kI8: *p = static_cast<uint8_t>(static_cast<int8_t>(int_src ? k : static_cast<int64_t>(d))); break;
        case StorageType::kF8E4M3: *p = double_to_fp8e4m3fn(d); break;
        case StorageType::kF64: {
          const double v = c.dtype() == DataType::kInt64 ? static_cast<double>(k) : d;
          std::memcpy(p, &v, 8);
          break;
        }
        case StorageType::kU64: {
          // uint64 constants bit for bit (ONNX Cast to uint64 of an integer keeps the low bits).
          const uint64_t v = c.dtype() == DataType::kUInt64 ? c.data<uint64_t>()[i]
                                                            : static_cast<uint64_t>(int_src ? k : load_as_int64(c.dtype(), c.raw(), i));
          std::memcpy(p, &v, 8);
          break;
        }
      }
    }
    const int id = new_val(name, c.shape(), t, false);
    if (dry_run_) {
      m_->vals[id].weight = &dry_run_;
      return id;
    }
    KILN_ASSIGN_OR_RETURN(void* dev, device_copy(bytes.data(), bytes.size(), "constant '" + name + "'"));
    m_->vals[id].weight = dev;
    m_->weights += bytes.size();
    return id;
  }

  // An input in row-major order: a constant uploaded in the storage dtype, or the activation
  // (reformatted out of NHWC first).
  StatusOr<int> row_major_operand(ir::ValueId v) override {
    if (!storage_is_float(st_) && g_.value(v).constant) return operand_as(v, st_);
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

  // Host bytes uploaded as they are (no conversion, not recorded for the plan): e.g. Gather's
  // normalized int64 indices.
  StatusOr<int> upload_raw(const std::string& name, const Shape& shape, const void* host, size_t bytes,
                           const std::string& what, bool graph_constant) override {
    const int id = new_val(name, shape, StorageType::kF32, false);
    if (dry_run_) {
      m_->vals[id].weight = &dry_run_;
      return id;
    }
    void* dev = nullptr;
    if (graph_constant && o_.weight_cache) {
      auto c = o_.weight_cache->get_constant(host, bytes);
      if (!c.ok()) return c.status().with_context(what);
      dev = *c;
    } else {
      KILN_ASSIGN_OR_RETURN(dev, device_copy(host, bytes, what));
    }
    m_->vals[id].weight = dev;
    m_->weights += bytes;
    return id;
  }

  const ir::Graph& g_;
  ValueShapes vs_;  // narrow integer / float64 I/O dtypes rewritten to the ones they are computed in (run())
  GpuBuildOptions o_;
  GpuModel::Impl* m_;
  StorageType plan_st_;  // the plan's storage (GpuBuildOptions::storage)
  StorageType st_;       // storage of the layer being lowered: its activations and weights
  StorageType fst_;      // the float precision of the layer being lowered (st_ unless exact_)
  bool exact_ = false;   // the layer's outputs are int32 / int64 / bool (st_ is their storage)
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
  // Split copies nothing reads any more — every part was read in place by the layers after it
  // (lower_attention's packed Q/K/V views) — are dropped: a value counts as read when a layer's
  // input or a graph output is it or a view (alias) of it.
  void drop_unread_copies() {
    std::vector<bool> read(m_->vals.size(), false);
    auto mark = [&](int v) {
      while (v >= 0) {
        read[static_cast<size_t>(v)] = true;
        v = m_->vals[static_cast<size_t>(v)].alias_of;
      }
    };
    for (const auto& l : m_->layers)
      for (int v : l->ins) mark(v);
    for (int v : m_->output_vals) mark(v);
    std::vector<std::unique_ptr<Layer>> kept;
    for (auto& l : m_->layers) {
      bool unread = l->op == "Split" && !l->outs.empty();
      for (int v : l->outs) unread = unread && v >= 0 && !read[static_cast<size_t>(v)];
      if (!unread) kept.push_back(std::move(l));
    }
    m_->layers = std::move(kept);
  }

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
  if (!storage_is_float(storage))
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
  l.drop_unread_copies();
  KILN_RETURN_IF_ERROR(plan_streams_and_memory(&scratch));
  GpuStreamSummary r;
  for (const auto& layer : scratch.layers) r.layers.push_back(layer->name);
  r.streams = scratch.streams.stream;
  r.aux_streams = scratch.streams.aux_streams;
  r.arena_bytes = scratch.arena;
  for (int v : scratch.input_vals) r.input_dtypes.push_back(storage_host_dtype(scratch.vals[v].type));
  for (int v : scratch.output_vals) r.output_dtypes.push_back(storage_host_dtype(scratch.vals[v].type));
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
  l.drop_unread_copies();
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
    // Layers run during set-up (and need the arena and workspace) when tuning, when presets are
    // checked, or when some layer has no preset; a plan's tactics at their own shapes only select.
    bool runs = opts.verify_presets || (opts.tune && opts.select_tactic);
    for (size_t i = 0; i < m->layers.size() && !runs; ++i) {
      auto p = opts.preset_tactics.find(m->layers[i]->name);
      runs = p == opts.preset_tactics.end() || p->second.id == kNoTactic;
    }
    std::shared_ptr<GpuResources> res = opts.setup_resources;
    if (!res) {
      KILN_ASSIGN_OR_RETURN(res, GpuResources::create());
    }
    if (runs) KILN_RETURN_IF_ERROR(res->reserve(m->arena, m->workspace));
    // The engine's shared set-up resources keep their handles, not their memory.
    struct Release {
      GpuResources* r;
      bool shared;
      ~Release() { if (shared) r->release_memory(); }
    } release{res.get(), opts.setup_resources != nullptr};
    step(runs ? "set-up arena + handles" : "set-up handles");
    std::map<std::string, double> select_ms;  // with a logger: set-up time per tactic source
    cudaStream_t s;
    KILN_CUDA_CHECK(cudaStreamCreate(&s));
    ExecState st;
    st.arena = static_cast<char*>(res->impl().arena);
    st.workspace = res->impl().workspace;
    st.workspace_bytes = m->workspace;
    st.cudnn = res->impl().cudnn;
    st.lt = res->impl().lt;
    st.stream = s;
    st.vals = &m->vals;
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
    Status ms = runs ? cuda_status(cudaMemsetAsync(st.arena, 0, std::max<size_t>(m->arena, 1), s), "cudaMemsetAsync",
                                   __FILE__, __LINE__)
                     : Status::Ok();
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
                        layer.fallback, layer.workspace(), m->streams.stream[i], layer.restored});
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
std::map<std::string, std::vector<uint8_t>> GpuModel::take_packed_weights() { return std::move(impl_->packed); }
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
