// CPU reference kernel for TfIdfVectorizer over integer tokens: counts the pool's n-grams
// (optionally with skips between tokens) in each row of X and weights the counts. String
// pools are not supported (Kiln has no string tensors in its kernels).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "core/numerics.h"

namespace kiln::cpu {
namespace {

// Operator TfIdfVectorizer, since version 9. The pool holds n-grams grouped by length:
// ngram_counts[n-1] is where the n-grams start in pool_int64s, and the k-th n-gram of the
// whole pool counts into output bin ngram_indexes[k]. For every row, start position and skip
// s in [0, max_skip_count], the n-gram x[i], x[i+s+1], ..., n in [min, max], is looked up;
// unigrams are counted only once (skips do not change them). Modes: TF = counts, IDF =
// weight where count > 0, TFIDF = count * weight (weights default to 1).
Status tfidf_vectorizer(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  if (x.dtype() != DataType::kInt32 && x.dtype() != DataType::kInt64) {
    if (x.dtype() == DataType::kString) return ctx.unsupported_here("string input (only int32/int64 tokens are supported)");
    return ctx.fail(std::string("input must be int32 or int64, got ") + dtype_name(x.dtype()));
  }
  if (x.rank() != 1 && x.rank() != 2) return ctx.fail("input must be 1-D [C] or 2-D [N, C], got " + shape_str(x.shape()));
  if (ctx.has_attr("pool_strings")) return ctx.unsupported_here("pool_strings (only pool_int64s is supported)");
  const int64_t min_n = ctx.attr_int("min_gram_length", -1), max_n = ctx.attr_int("max_gram_length", -1);
  const int64_t max_skip = ctx.attr_int("max_skip_count", -1);
  const std::string mode = ctx.attr_string("mode", "");
  const auto counts = ctx.attr_ints("ngram_counts");
  const auto indexes = ctx.attr_ints("ngram_indexes");
  const auto pool = ctx.attr_ints("pool_int64s");
  const auto weights = ctx.attr_floats("weights");
  if (min_n < 1 || max_n < min_n) return ctx.fail("need 1 <= min_gram_length <= max_gram_length");
  if (max_skip < 0) return ctx.fail("max_skip_count must be >= 0");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") return ctx.fail("mode must be TF, IDF or TFIDF, got '" + mode + "'");
  if (static_cast<int64_t>(counts.size()) < max_n) return ctx.fail("ngram_counts needs an entry per n-gram length up to max_gram_length");

  // Pool n-grams by length -> output bin.
  std::vector<std::map<std::vector<int64_t>, int64_t>> grams(static_cast<size_t>(max_n) + 1);
  size_t k = 0;  // global n-gram ordinal in the pool
  for (size_t li = 0; li < counts.size(); ++li) {
    const int64_t n = static_cast<int64_t>(li) + 1;
    const int64_t begin = counts[li];
    const int64_t end = li + 1 < counts.size() ? counts[li + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % n != 0)
      return ctx.fail("ngram_counts entry " + std::to_string(li) + " does not partition pool_int64s into " + std::to_string(n) + "-grams");
    for (int64_t p = begin; p < end; p += n, ++k) {
      if (k >= indexes.size()) return ctx.fail("ngram_indexes has fewer entries than the pool has n-grams");
      if (indexes[k] < 0) return ctx.fail("ngram_indexes has a negative entry");
      if (n <= max_n) grams[n][std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n)] = indexes[k];
    }
  }
  int64_t bins = 0;
  for (int64_t i : indexes) bins = std::max(bins, i + 1);
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < bins) return ctx.fail("weights has fewer entries than output bins");

  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, cols = x.dim(-1);
  Tensor y(DataType::kFloat32, x.rank() == 2 ? Shape{rows, bins} : Shape{bins});
  float* out = y.data<float>();
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> freq(static_cast<size_t>(bins), 0.0);
    for (int64_t skip = 0; skip <= max_skip; ++skip) {
      const int64_t step = skip + 1;
      for (int64_t i = 0; i < cols; ++i) {
        for (int64_t n = std::max<int64_t>(min_n, skip > 0 ? 2 : 1); n <= max_n; ++n) {
          if (i + (n - 1) * step >= cols) break;
          if (grams[n].empty()) continue;
          gram.clear();
          for (int64_t j = 0; j < n; ++j) gram.push_back(load_as_int64(x.dtype(), x.raw(), r * cols + i + j * step));
          auto hit = grams[n].find(gram);
          if (hit != grams[n].end()) freq[hit->second] += 1;
        }
      }
    }
    for (int64_t b = 0; b < bins; ++b) {
      const double w = weights.empty() ? 1.0 : weights[b];
      double v = freq[b];
      if (mode == "IDF") v = v > 0 ? w : 0;
      else if (mode == "TFIDF") v *= w;
      out[r * bins + b] = static_cast<float>(v);
    }
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void register_sequence_tfidf_kernels(KernelRegistry& r) { r.add(ir::OpKind::kTfIdfVectorizer, tfidf_vectorizer); }

}  // namespace kiln::cpu
