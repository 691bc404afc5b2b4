// FP8 activation-scale calibration of the step graph (see fp8_calibration.h).
#include "llm/fp8_calibration.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "backends/cpu/interpreter.h"
#include "llm/decoder_layers.h"
#include "llm/step_graph.h"
#include "llm/tokenizer.h"

namespace kiln::llm {

namespace {

constexpr double kE4M3Max = 448.0;  // E4M3FN's largest finite value (OCP OFP8 rev 1.0)

}  // namespace

StatusOr<Fp8Calibration> calibrate_fp8(const Checkpoint& ck, const std::vector<int32_t>& ids,
                                       const Fp8CalibrationOptions& o) {
  const ModelConfig& c = ck.config();
  if (ids.empty()) return invalid_argument("fp8 calibration: no calibration tokens");
  if (o.max_seq_len < 1 || o.block_size < 1)
    return invalid_argument("fp8 calibration: max_seq_len " + std::to_string(o.max_seq_len) + " and block_size " +
                            std::to_string(o.block_size) + " must be >= 1");
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      return invalid_argument("fp8 calibration: token " + std::to_string(i) + " is id " + std::to_string(ids[i]) +
                              ", outside the model's vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  const int64_t S = std::max<int64_t>(1, std::min(o.max_seq_len, c.max_position_embeddings));
  const int64_t seq = std::min<int64_t>(S, static_cast<int64_t>(ids.size()));
  const int64_t blocks = (seq + o.block_size - 1) / o.block_size;

  StepGraphOptions so;
  so.max_rows = 1;
  so.max_blocks_per_seq = blocks;
  so.block_size = o.block_size;
  so.checkpoint_fp8 = false;  // an FP8 checkpoint is calibrated on its dequantized weights
  KILN_ASSIGN_OR_RETURN(ir::Graph g, build_step_graph(c, ck, so));

  // The value each projection reads (its MatMul's input 0), and one histogram per such value.
  const std::vector<Projection> projections = decoder_projections(c);
  std::map<std::string, ir::ValueId> input_of;
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.op == ir::OpKind::kMatMul && !n.inputs.empty()) input_of[n.name] = n.inputs[0];
  // Min-max: the largest finite |x| of each observed value, and its finite / non-finite counts.
  struct Seen {
    double amax = 0;
    int64_t finite = 0, non_finite = 0;
    void add(const float* x, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(x[i])) {
          ++non_finite;
          continue;
        }
        ++finite;
        amax = std::max(amax, static_cast<double>(std::fabs(x[i])));
      }
    }
  };
  std::map<ir::ValueId, Seen> hist;
  for (const Projection& p : projections) {
    auto it = input_of.find(p.name);
    if (it == input_of.end()) return internal_error("fp8 calibration: the step graph has no projection '" + p.name + "'");
    hist.emplace(it->second, Seen{});
  }
  // Each layer's keys and values as PagedAttention appends them (its inputs 1 and 2).
  std::vector<std::pair<ir::ValueId, ir::ValueId>> kv_of(static_cast<size_t>(c.num_layers), {ir::kNoValue, ir::kNoValue});
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.op == ir::OpKind::kPagedAttention && n.inputs.size() >= 3) {
      const int64_t l = n.attr_int("layer", -1);
      if (l < 0 || l >= c.num_layers) return internal_error("fp8 calibration: PagedAttention '" + n.name + "' has layer " + std::to_string(l));
      kv_of[static_cast<size_t>(l)] = {n.inputs[1], n.inputs[2]};
      hist.emplace(n.inputs[1], Seen{});
      hist.emplace(n.inputs[2], Seen{});
    }
  InterpreterOptions io;
  io.on_node = [&](const ir::Node& n, const std::vector<Tensor>& outs, double) {
    for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i) {
      auto h = hist.find(n.outputs[i]);
      if (h != hist.end() && outs[i].dtype() == DataType::kFloat32) h->second.add(outs[i].data<float>(), outs[i].numel());
    }
  };

  Fp8Calibration out;
  const int64_t block_elems = kv_block_elements(c, o.block_size);
  std::vector<std::vector<float>> pools(static_cast<size_t>(c.num_layers));
  for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(seq)) {
    const int64_t t = std::min<int64_t>(seq, static_cast<int64_t>(ids.size() - start));
    Tensor in_ids(DataType::kInt64, {t}), pos(DataType::kInt64, {t}), token_seq(DataType::kInt32, {t}),
        table(DataType::kInt32, {1, blocks}), kv(DataType::kInt64, {c.num_layers, 2}), rows(DataType::kInt64, {1});
    for (int64_t i = 0; i < t; ++i) {
      in_ids.data<int64_t>()[i] = ids[start + static_cast<size_t>(i)];
      pos.data<int64_t>()[i] = i;
      token_seq.data<int32_t>()[i] = 0;
    }
    for (int64_t b = 0; b < blocks; ++b) table.data<int32_t>()[b] = static_cast<int32_t>(b);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      pools[l].assign(static_cast<size_t>(blocks * block_elems), 0.f);  // a fresh cache per sequence
      kv.data<int64_t>()[2 * l] = static_cast<int64_t>(reinterpret_cast<intptr_t>(pools[l].data()));
      kv.data<int64_t>()[2 * l + 1] = blocks;
    }
    rows.data<int64_t>()[0] = t - 1;
    StatusOr<std::vector<Tensor>> r = interpret(g, {in_ids, pos, token_seq, table, kv, rows}, nullptr, io);
    if (!r.ok())
      return Status(r.status().code(), "fp8 calibration: the float step graph on tokens [" + std::to_string(start) + ", " +
                                           std::to_string(start + static_cast<size_t>(t)) + "): " + r.status().message());
    out.tokens += t;
    ++out.sequences;
  }
  for (const Projection& p : projections) {
    const Seen& h = hist.at(input_of.at(p.name));
    if (h.finite == 0)
      return invalid_argument("fp8 calibration: the input of projection '" + p.name + "' had no finite value (" +
                              std::to_string(h.non_finite) + " non-finite)");
    out.amax[p.name] = h.amax;
    out.x_scales[p.name] = h.amax > 0 ? static_cast<float>(h.amax / kE4M3Max) : 1.f;
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto [kv, vv] = kv_of[static_cast<size_t>(l)];
    if (kv == ir::kNoValue) return internal_error("fp8 calibration: the step graph has no PagedAttention of layer " + std::to_string(l));
    const double ka = hist.at(kv).amax, va = hist.at(vv).amax;
    out.kv_amax.emplace_back(ka, va);
    out.kv_scales.emplace_back(ka > 0 ? static_cast<float>(ka / kE4M3Max) : 1.f, va > 0 ? static_cast<float>(va / kE4M3Max) : 1.f);
  }
  return out;
}

StatusOr<std::vector<int32_t>> parse_calibration_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  int item = 0;
  while (i <= text.size()) {
    size_t end = text.find(',', i);
    if (end == std::string::npos) end = text.size();
    std::string s = text.substr(i, end - i);
    const size_t a = s.find_first_not_of(" \t\n\r"), b = s.find_last_not_of(" \t\n\r");
    s = a == std::string::npos ? "" : s.substr(a, b - a + 1);
    const bool digits = !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
    const long long v = digits ? std::stoll(s) : -1;
    if (!digits || v > 2147483647LL)
      return invalid_argument("calibration ids: item " + std::to_string(item) + " '" + s +
                              "' is not a token id (a non-negative 32-bit integer; expected e.g. 1,2,3)");
    ids.push_back(static_cast<int32_t>(v));
    ++item;
    i = end + 1;
  }
  return ids;
}

StatusOr<std::vector<int32_t>> calibration_ids_from_text_file(const Checkpoint& ck, const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return not_found("calibration text '" + path + "' does not exist or is not a file");
  KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  if (text.empty()) return invalid_argument("calibration text '" + path + "' is empty");
  StatusOr<std::unique_ptr<Tokenizer>> tok = load_tokenizer(ck.dir());
  if (!tok.ok())
    return Status(tok.status().code(), "calibration text '" + path + "': checkpoint '" + ck.dir() +
                                           "' has no usable tokenizer (" + tok.status().message() +
                                           "); pass token ids instead");
  StatusOr<std::vector<int32_t>> ids = (*tok)->encode(text);
  if (!ids.ok()) return Status(ids.status().code(), "calibration text '" + path + "': " + ids.status().message());
  if (ids->empty()) return invalid_argument("calibration text '" + path + "' encodes to no token");
  return ids;
}

}  // namespace kiln::llm
