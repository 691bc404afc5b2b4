// TfIdfVectorizer (ONNX, since version 9) over int32 / int64 tokens (docs/decisions/0076): the
// pool's n-grams are checked and flattened here as the CPU reference builds its map
// (cpu/ops_sequence_tfidf.cc: a repeated gram keeps its last bin), uploaded, and counted by one
// kernel (kernels_tfidf.h). String pools are refused, as on the CPU.
#include <algorithm>
#include <map>

#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_tfidf.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_tfidf(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const DataType xt = ctx.dtype(n.inputs.at(0));
  if (xt != DataType::kInt32 && xt != DataType::kInt64) return unsupported(where + "tokens of dtype " + dtype_name(xt));
  const Shape& x = ctx.shape(n.inputs[0]);
  if (x.size() != 1 && x.size() != 2) return invalid_argument(where + "input must be 1-D or 2-D, got " + shape_str(x));
  if (n.has_attr("pool_strings")) return unsupported(where + "pool_strings (only pool_int64s is supported)");
  TfIdfDesc d;
  d.min_n = n.attr_int("min_gram_length", -1);
  d.max_n = n.attr_int("max_gram_length", -1);
  d.max_skip = n.attr_int("max_skip_count", -1);
  const std::string mode = n.attr_string("mode", "");
  const auto counts = n.attr_ints("ngram_counts");
  const auto indexes = n.attr_ints("ngram_indexes");
  const auto pool = n.attr_ints("pool_int64s");
  const auto weights = n.attr_floats("weights");
  if (d.min_n < 1 || d.max_n < d.min_n) return invalid_argument(where + "need 1 <= min_gram_length <= max_gram_length");
  if (d.max_skip < 0) return invalid_argument(where + "max_skip_count must be >= 0");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") return invalid_argument(where + "mode '" + mode + "'");
  d.mode = mode == "TF" ? 0 : (mode == "IDF" ? 1 : 2);
  if (static_cast<int64_t>(counts.size()) < d.max_n)
    return invalid_argument(where + "ngram_counts needs an entry per n-gram length up to max_gram_length");
  std::map<std::vector<int64_t>, int64_t> grams;  // the CPU's map, all lengths together (lengths differ by size)
  size_t k = 0;
  for (size_t li = 0; li < counts.size(); ++li) {
    const int64_t len = static_cast<int64_t>(li) + 1;
    const int64_t begin = counts[li];
    const int64_t end = li + 1 < counts.size() ? counts[li + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % len != 0)
      return invalid_argument(where + "ngram_counts entry " + std::to_string(li) + " does not partition pool_int64s");
    for (int64_t p = begin; p < end; p += len, ++k) {
      if (k >= indexes.size()) return invalid_argument(where + "ngram_indexes has fewer entries than the pool has n-grams");
      if (indexes[k] < 0) return invalid_argument(where + "ngram_indexes has a negative entry");
      if (len <= d.max_n) grams[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + len)] = indexes[k];
    }
  }
  for (int64_t i : indexes) d.bins = std::max(d.bins, i + 1);
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < d.bins)
    return invalid_argument(where + "weights has fewer entries than output bins");
  d.rows = x.size() == 2 ? x[0] : 1;
  d.cols = x.back();
  d.x64 = xt == DataType::kInt64;
  const Shape want = x.size() == 2 ? Shape{d.rows, d.bins} : Shape{d.bins};
  if (ctx.shape(n.outputs[0]) != want)
    return invalid_argument(where + "output shape " + shape_str(ctx.shape(n.outputs[0])) + ", expected " + shape_str(want));
  std::vector<int64_t> tokens, meta;
  for (const auto& [gram, bin] : grams) {
    meta.insert(meta.end(), {static_cast<int64_t>(gram.size()), static_cast<int64_t>(tokens.size()), bin});
    tokens.insert(tokens.end(), gram.begin(), gram.end());
  }
  d.grams = static_cast<int64_t>(grams.size());
  if (tokens.empty()) tokens.push_back(0);  // device buffers are never empty
  if (meta.empty()) meta.push_back(0);
  std::vector<int> ins;
  KILN_ASSIGN_OR_RETURN(int xa, ctx.operand_as(n.inputs[0], d.x64 ? StorageType::kI64 : StorageType::kI32));
  ins.push_back(xa);
  KILN_ASSIGN_OR_RETURN(int ta, ctx.upload_raw(n.name + ":pool", {static_cast<int64_t>(tokens.size())}, tokens.data(),
                                               tokens.size() * sizeof(int64_t), "TfIdfVectorizer pool"));
  ins.push_back(ta);
  KILN_ASSIGN_OR_RETURN(int ma, ctx.upload_raw(n.name + ":grams", {static_cast<int64_t>(meta.size())}, meta.data(),
                                               meta.size() * sizeof(int64_t), "TfIdfVectorizer grams"));
  ins.push_back(ma);
  const bool has_w = !weights.empty();
  if (has_w) {
    KILN_ASSIGN_OR_RETURN(int wa, ctx.upload_raw(n.name + ":weights", {static_cast<int64_t>(weights.size())}, weights.data(),
                                                 weights.size() * sizeof(float), "TfIdfVectorizer weights"));
    ins.push_back(wa);
  }
  if (ctx.storage() != StorageType::kF32) return unsupported(where + "output storage " + storage_name(ctx.storage()) + " (float32 only)");
  auto layer = make_kernel_layer("TfIdfVectorizer", "kiln.tfidf", [=](ExecState& s, const Layer& l) {
    return launch_tfidf(s.ptr(l.ins[0]), static_cast<const int64_t*>(s.ptr(l.ins[1])),
                        static_cast<const int64_t*>(s.ptr(l.ins[2])),
                        has_w ? static_cast<const float*>(s.ptr(l.ins[3])) : nullptr, static_cast<float*>(s.ptr(l.outs[0])),
                        d, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
