// LlmRunner: admission, step packing (decode tokens first, then prefill chunks), bucketing,
// sampling (host or GPU) and stop checks between steps of the step-graph engine (semantics in runner.h).
#include "llm/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>

#include "llm/device_sampler.h"
#include "llm/kv_pool_device.h"
#include "llm/sampling.h"
#include "llm/step_graph.h"

namespace kiln::llm {

namespace {

// The step graph's io (src/llm/step_graph.h, decision 0059).
constexpr const char* kInputIds = kStepInputIdsName;        // int64 [T]
constexpr const char* kPositionIds = kStepPositionIdsName;  // int64 [T]
constexpr const char* kTokenSeq = kStepTokenSeqName;        // int32 [T], -1 = padding
constexpr const char* kBlockTable = kStepBlockTableName;    // int32 [R, MB]
constexpr const char* kKvPools = kStepKvPoolsName;          // int64 [L, 2]
constexpr const char* kLogitRows = kStepLogitRowsName;      // int64 [R]
constexpr const char* kLogits = kStepLogitsName;            // float32 [R, vocab]
constexpr const char* kNextTokens = kStepNextTokensName;    // int64 [R] (plans built before it lack it)

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string shape_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// The io tensor `name` of `engine` with `dtype` and (where >= 0 in `dims`) those static dims.
Status check_io(const Engine& engine, const std::string& name, DataType dtype, const std::vector<int64_t>& dims,
                bool is_input) {
  const IOTensor* io = engine.find_io(name);
  if (!io || io->is_input != is_input)
    return invalid_plan(std::string("LLM engine: the plan has no ") + (is_input ? "input" : "output") + " '" + name +
                        "' (not a plan of the LLM step graph?)");
  if (io->desc.dtype != dtype)
    return invalid_plan("LLM engine: '" + name + "' is " + dtype_name(io->desc.dtype) + ", expected " + dtype_name(dtype));
  if (!io->desc.rank_known || io->desc.dims.size() != dims.size())
    return invalid_plan("LLM engine: '" + name + "' has shape " + io->desc.shape_string() + ", expected " + shape_str(dims));
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] >= 0 && io->desc.dims[i] != dims[i])
      return invalid_plan("LLM engine: '" + name + "' has shape " + io->desc.shape_string() + ", kiln_llm.json implies " +
                          shape_str(dims));
  return Status::Ok();
}

}  // namespace

struct LlmRunner::Sequence {
  size_t request = 0;
  int32_t row = -1;
  std::vector<int32_t> ids;   // prompt, then the generated tokens
  size_t prompt_len = 0;
  int64_t cached = 0;         // tokens whose keys and values are in the pool
  Sampler sampler;
  const GenerationOptions* options = nullptr;
  const std::vector<int64_t>* eos = nullptr;
  bool done = false;
  explicit Sequence(const SamplingOptions& s) : sampler(s) {}
};

// Device io (CUDA plans with next_tokens; decision 0060's addendum): pinned host staging that the
// contexts' inputs and next_tokens are bound to (enqueue copies them to and from the device on the
// stream), the logits in device memory, the GPU sampler (decision 0077) or, with host sampling, a
// pinned [R, vocab] buffer that receives only the rows of sampling requests, and per bucket the
// CUDA graph of its enqueue and sampler (cuda_graph on).
struct LlmRunner::DeviceIo {
  CudaStream stream = nullptr;
  void* ids = nullptr;    // int64 [max_num_tokens]
  void* pos = nullptr;    // int64 [max_num_tokens]
  void* seq = nullptr;    // int32 [max_num_tokens]
  void* table = nullptr;  // int32 [R, MB]
  void* pools = nullptr;  // int64 [L, 2]
  void* rows = nullptr;   // int64 [R]
  void* next = nullptr;   // int64 [R]: next_tokens
  void* logits_dev = nullptr;    // float32 [R, vocab], device
  float* logits_host = nullptr;  // float32 [R, vocab], pinned, host sampling only; only sampled rows are written
  std::unique_ptr<DeviceSampler> sampler;  // device_sampling
  std::map<int64_t, void*> graphs;  // by bucket: cudaGraphExec_t
  ~DeviceIo() {
    for (auto& [b, g] : graphs) llm_graph_destroy(g);
    if (stream) (void)llm_stream_sync(stream, "LlmRunner teardown");
    sampler.reset();
    llm_stream_destroy(stream);
    for (void* p : {ids, pos, seq, table, pools, rows, next, static_cast<void*>(logits_host)}) llm_pinned_free(p);
    kv_device_free(logits_dev);
  }
};

LlmRunner::LlmRunner() = default;
LlmRunner::~LlmRunner() = default;

StatusOr<std::unique_ptr<LlmRunner>> LlmRunner::from_dir(const std::string& dir, const LlmRunnerOptions& options) {
  KILN_ASSIGN_OR_RETURN(LlmEngineInfo info, read_engine_info(dir));
  KILN_ASSIGN_OR_RETURN(ModelConfig config, read_model_config(dir + "/config.json"));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Engine> engine, Runtime::load_engine(dir + "/" + info.plan_file));
  std::unique_ptr<Tokenizer> tok;
  if (options.load_tokenizer && !info.tokenizer_files.empty()) {
    KILN_ASSIGN_OR_RETURN(tok, load_tokenizer(dir));
  }
  return create(std::move(engine), info, config, std::move(tok), options);
}

StatusOr<std::unique_ptr<LlmRunner>> LlmRunner::from_plan(const std::string& plan_path, const LlmRunnerOptions& options) {
  const std::filesystem::path p(plan_path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  KILN_ASSIGN_OR_RETURN(LlmEngineInfo info, read_engine_info(dir));
  if (info.plan_file != p.filename().string())
    return invalid_argument("LlmRunner: '" + plan_path + "' is not the plan of " + dir + "/" + kEngineInfoFile + " ('" +
                            info.plan_file + "')");
  return from_dir(dir, options);
}

StatusOr<std::unique_ptr<LlmRunner>> LlmRunner::create(std::shared_ptr<const Engine> engine, const LlmEngineInfo& info,
                                                       const ModelConfig& config, std::unique_ptr<Tokenizer> tokenizer,
                                                       const LlmRunnerOptions& options) {
  if (!engine) return invalid_argument("LlmRunner: no engine");
  if (config.num_layers != info.num_layers || config.num_kv_heads != info.num_kv_heads || config.head_dim != info.head_dim ||
      config.vocab_size != info.vocab_size)
    return invalid_argument("LlmRunner: config.json (" + std::to_string(config.num_layers) + " layers, " +
                            std::to_string(config.num_kv_heads) + " kv heads, head_dim " + std::to_string(config.head_dim) +
                            ", vocab " + std::to_string(config.vocab_size) + ") is not the model kiln_llm.json describes (" +
                            std::to_string(info.num_layers) + ", " + std::to_string(info.num_kv_heads) + ", " +
                            std::to_string(info.head_dim) + ", " + std::to_string(info.vocab_size) + ")");
  if (info.max_num_tokens < info.max_rows)
    return invalid_argument("LlmRunner: max_num_tokens " + std::to_string(info.max_num_tokens) + " < max_batch " +
                            std::to_string(info.max_rows) + ": a step must hold one decode token of every running sequence");
  const Engine& e = *engine;
  KILN_RETURN_IF_ERROR(check_io(e, kInputIds, DataType::kInt64, {-1}, true));
  KILN_RETURN_IF_ERROR(check_io(e, kPositionIds, DataType::kInt64, {-1}, true));
  KILN_RETURN_IF_ERROR(check_io(e, kTokenSeq, DataType::kInt32, {-1}, true));
  KILN_RETURN_IF_ERROR(check_io(e, kBlockTable, DataType::kInt32, {info.max_rows, info.max_blocks_per_seq}, true));
  KILN_RETURN_IF_ERROR(check_io(e, kKvPools, DataType::kInt64, {info.num_layers, 2}, true));
  KILN_RETURN_IF_ERROR(check_io(e, kLogitRows, DataType::kInt64, {info.max_rows}, true));
  KILN_RETURN_IF_ERROR(check_io(e, kLogits, DataType::kFloat32, {info.max_rows, info.vocab_size}, false));
  const bool cuda = e.header().target.backend != PlanBackend::kCpu;
  const bool has_next = e.find_io(kNextTokens) != nullptr;
  if (has_next) KILN_RETURN_IF_ERROR(check_io(e, kNextTokens, DataType::kInt64, {info.max_rows}, false));
  if ((info.device == "cuda") != cuda)
    return invalid_argument("LlmRunner: kiln_llm.json says device '" + info.device + "', the plan's target is " +
                            e.header().target.to_string());
  if (const ShapeRange* r = e.profiles().empty() ? nullptr : e.profiles()[0].find(kInputIds);
      r && !r->max.empty() && r->max[0] < info.max_num_tokens)
    return invalid_plan("LlmRunner: the plan's input_ids profile ends at " + std::to_string(r->max[0]) +
                        " tokens, kiln_llm.json's max_num_tokens is " + std::to_string(info.max_num_tokens));

  std::unique_ptr<LlmRunner> r(new LlmRunner());
  r->engine_ = std::move(engine);
  r->info_ = info;
  r->config_ = config;
  r->tokenizer_ = std::move(tokenizer);
  r->cuda_graph_ = options.cuda_graph && cuda;
  // Device io buffers; allocated before the contexts, inside the activation measurement below.
  auto setup_device_io = [&]() -> Status {
    if (!cuda || !has_next || r->dio_) return Status::Ok();
    auto d = std::make_unique<DeviceIo>();
    const size_t N = static_cast<size_t>(info.max_num_tokens), R = static_cast<size_t>(info.max_rows);
    const size_t V = static_cast<size_t>(info.vocab_size);
    KILN_ASSIGN_OR_RETURN(d->stream, llm_stream_create());
    KILN_ASSIGN_OR_RETURN(d->ids, llm_pinned_alloc(N * 8, "input_ids staging"));
    KILN_ASSIGN_OR_RETURN(d->pos, llm_pinned_alloc(N * 8, "position_ids staging"));
    KILN_ASSIGN_OR_RETURN(d->seq, llm_pinned_alloc(N * 4, "token_seq staging"));
    KILN_ASSIGN_OR_RETURN(d->table, llm_pinned_alloc(R * static_cast<size_t>(info.max_blocks_per_seq) * 4, "block_table staging"));
    KILN_ASSIGN_OR_RETURN(d->pools, llm_pinned_alloc(static_cast<size_t>(info.num_layers) * 2 * 8, "kv_pools staging"));
    KILN_ASSIGN_OR_RETURN(d->rows, llm_pinned_alloc(R * 8, "logit_rows staging"));
    KILN_ASSIGN_OR_RETURN(d->next, llm_pinned_alloc(R * 8, "next_tokens"));
    KILN_ASSIGN_OR_RETURN(d->logits_dev, kv_device_alloc_zeroed(R * V * 4, "the step's logits"));
    if (options.device_sampling) {
      KILN_ASSIGN_OR_RETURN(d->sampler, DeviceSampler::create(info.max_rows, info.max_num_tokens, info.vocab_size));
    } else {
      KILN_ASSIGN_OR_RETURN(void* lh, llm_pinned_alloc(R * V * 4, "sampled logits rows"));
      d->logits_host = static_cast<float*>(lh);
    }
    r->dio_ = std::move(d);
    return Status::Ok();
  };

  KvCacheLayout layout;
  layout.num_layers = info.num_layers;
  layout.num_kv_heads = info.num_kv_heads;
  layout.head_dim = info.head_dim;
  layout.block_size = info.block_size;
  layout.cache_dtype = info.cache_dtype;
  KILN_RETURN_IF_ERROR(validate_kv_layout(layout));
  const int64_t full = info.max_rows * info.max_blocks_per_seq;  // every row a full-length sequence
  const KvPoolMemory memory = cuda ? KvPoolMemory::kDevice : KvPoolMemory::kHost;
  int64_t blocks = options.num_blocks;
  const uint64_t budget = options.max_memory_bytes ? options.max_memory_bytes : info.max_memory_bytes;
  if (blocks <= 0 && cuda) {
    // Every bucket's context is prepared first (its activation arena allocated) with a one-block
    // pool and padding tokens only, so the device memory they take is measured, not estimated.
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<KvPool> probe, KvPool::create(layout, 1, memory));
    r->pool_pointers_ = probe->pool_pointers();
    size_t free0 = 0, total = 0;
    kv_device_memory(&free0, &total);
    KILN_RETURN_IF_ERROR(setup_device_io());
    Tensor table(DataType::kInt32, {info.max_rows, info.max_blocks_per_seq});
    Tensor rows(DataType::kInt64, {info.max_rows});
    for (int64_t b = 1;; b = std::min(b * 2, info.max_num_tokens)) {
      KILN_ASSIGN_OR_RETURN(ExecutionContext * ctx, r->context_for(b));
      Tensor ids(DataType::kInt64, {b}), pos(DataType::kInt64, {b}), seq(DataType::kInt32, {b});
      std::fill(seq.data<int32_t>(), seq.data<int32_t>() + b, -1);
      KILN_RETURN_IF_ERROR(ctx->set_input(kInputIds, ids));
      KILN_RETURN_IF_ERROR(ctx->set_input(kPositionIds, pos));
      KILN_RETURN_IF_ERROR(ctx->set_input(kTokenSeq, seq));
      KILN_RETURN_IF_ERROR(ctx->set_input(kBlockTable, table));
      KILN_RETURN_IF_ERROR(ctx->set_input(kKvPools, r->pool_pointers_));
      KILN_RETURN_IF_ERROR(ctx->set_input(kLogitRows, rows));
      KILN_RETURN_IF_ERROR(ctx->execute());
      if (b == info.max_num_tokens) break;
    }
    size_t free1 = 0;
    kv_device_memory(&free1, &total);
    const uint64_t activations = free0 > free1 ? free0 - free1 : 0;
    const uint64_t weights = e.device_memory().weight_bytes;
    constexpr uint64_t kSlack = 64ull << 20;  // bytes left for the CUDA context's own growth
    uint64_t kv_bytes = 0;
    if (budget > 0) {
      if (budget < weights + activations + kSlack)
        return Status(StatusCode::kOutOfMemory,
                      "LlmRunner: the memory budget of " + std::to_string(budget >> 20) + " MiB leaves nothing for the KV cache: weights take " +
                          std::to_string(weights >> 20) + " MiB, the step's activations " + std::to_string(activations >> 20) + " MiB");
      kv_bytes = std::min<uint64_t>(budget - weights - activations - kSlack, free1 > kSlack ? free1 - kSlack : 0);
    } else {
      kv_bytes = free1 / 10 * 9;
    }
    blocks = std::min(full, kv_blocks_for_budget(layout, kv_bytes));
  } else if (blocks <= 0) {
    blocks = full;
    if (budget > 0) {
      const uint64_t weights = e.weights_bytes();
      if (budget <= weights)
        return Status(StatusCode::kOutOfMemory, "LlmRunner: the memory budget of " + std::to_string(budget >> 20) +
                                                    " MiB is below the weights' " + std::to_string(weights >> 20) + " MiB");
      blocks = std::min(full, kv_blocks_for_budget(layout, budget - weights));
    }
  }
  KILN_RETURN_IF_ERROR(setup_device_io());
  if (blocks < 1)
    return Status(StatusCode::kOutOfMemory, "LlmRunner: the memory budget holds no KV block of " +
                                                std::to_string(layout.block_bytes_all_layers()) + " bytes");
  KILN_ASSIGN_OR_RETURN(r->blocks_, KvBlockManager::create(blocks, info.block_size, info.max_rows, info.max_blocks_per_seq));
  KILN_ASSIGN_OR_RETURN(r->pool_, KvPool::create(layout, blocks, memory));
  r->pool_pointers_ = r->pool_->pool_pointers();
  return r;
}

int64_t LlmRunner::max_length() const {
  int64_t n = std::min(info_.max_seq_len, config_.max_position_embeddings);
  if (config_.sliding_window) n = std::min(n, *config_.sliding_window);
  return n;
}

int64_t LlmRunner::bucket(int64_t tokens) const {
  int64_t b = 1;
  while (b < tokens) b *= 2;
  return std::min(b, info_.max_num_tokens);
}

StatusOr<ExecutionContext*> LlmRunner::context_for(int64_t bucket) {
  auto it = contexts_.find(bucket);
  if (it == contexts_.end()) {
    std::unique_ptr<ExecutionContext> ctx = engine_->create_execution_context();
    if (!ctx) return internal_error("LlmRunner: the engine made no execution context");
    if (dio_) {
      // Device io: the runner captures enqueue itself (run_device_step); the T inputs' shape is
      // the bucket's, every io tensor bound to the staging (the same buffers for every bucket).
      ctx->set_cuda_graph(false);
      for (const char* name : {kInputIds, kPositionIds, kTokenSeq})
        KILN_RETURN_IF_ERROR(ctx->set_input_shape(name, {bucket}));
      for (auto [name, p] : {std::pair<const char*, void*>{kInputIds, dio_->ids}, {kPositionIds, dio_->pos},
                             {kTokenSeq, dio_->seq}, {kBlockTable, dio_->table}, {kKvPools, dio_->pools},
                             {kLogitRows, dio_->rows}, {kLogits, dio_->logits_dev}, {kNextTokens, dio_->next}})
        KILN_RETURN_IF_ERROR(ctx->set_tensor_address(name, p));
    } else {
      ctx->set_cuda_graph(cuda_graph_);
    }
    it = contexts_.emplace(bucket, std::move(ctx)).first;
  }
  return it->second.get();
}

StatusOr<std::vector<LayerTiming>> LlmRunner::profile_step(int64_t tokens) {
  if (!dio_) return unsupported("profile_step: the engine runs no device io (a CPU plan, or no next_tokens output)");
  const int64_t tp = bucket(tokens);
  auto it = contexts_.find(tp);
  if (it == contexts_.end() || !stepped_.count(tp))
    return invalid_argument("profile_step: no step of " + std::to_string(tp) + " tokens has run yet");
  return it->second->profile_enqueued(dio_->stream);
}

Status LlmRunner::run_device_step(ExecutionContext* ctx, int64_t tp, const std::vector<int32_t>& sample_rows) {
  DeviceIo& d = *dio_;
  stepped_.insert(tp);
  // The step, then the sampler over its logits: every step, so the rows' seen-id bitmaps follow
  // every token (decision 0077).
  auto record = [&]() -> Status {
    KILN_RETURN_IF_ERROR(ctx->enqueue(d.stream));
    if (d.sampler) KILN_RETURN_IF_ERROR(d.sampler->enqueue(d.logits_dev, d.ids, d.seq, d.pos, tp, d.stream));
    return Status::Ok();
  };
  if (cuda_graph_) {
    auto it = d.graphs.find(tp);
    if (it == d.graphs.end()) {
      KILN_ASSIGN_OR_RETURN(void* g, llm_graph_capture(d.stream, record));
      it = d.graphs.emplace(tp, g).first;
    }
    KILN_RETURN_IF_ERROR(llm_graph_launch(it->second, d.stream));
  } else {
    KILN_RETURN_IF_ERROR(record());
  }
  // Only the sampled rows' logits, one copy per run of consecutive rows.
  const size_t row_bytes = static_cast<size_t>(config_.vocab_size) * 4;
  std::vector<int32_t> rows = sample_rows;
  std::sort(rows.begin(), rows.end());
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    const size_t off = static_cast<size_t>(rows[i]) * row_bytes;
    KILN_RETURN_IF_ERROR(llm_copy_async(reinterpret_cast<char*>(d.logits_host) + off,
                                        static_cast<const char*>(d.logits_dev) + off, (j - i) * row_bytes, d.stream,
                                        "the sampled logits rows"));
    i = j;
  }
  return llm_stream_sync(d.stream, "the step");
}

StatusOr<std::vector<LlmResult>> LlmRunner::generate(const std::vector<LlmRequest>& requests, const TokenCallback& on_token) {
  const auto t0 = std::chrono::steady_clock::now();
  stats_ = {};
  stats_.device_io = dio_ != nullptr;
  stats_.device_sampling = dio_ && dio_->sampler;
  const int64_t V = config_.vocab_size, R = info_.max_rows, N = info_.max_num_tokens;
  const std::vector<int64_t>& default_eos = info_.eos_token_ids;
  std::vector<LlmResult> results(requests.size());
  std::deque<size_t> waiting;
  for (size_t i = 0; i < requests.size(); ++i) {
    const LlmRequest& q = requests[i];
    const std::string which = "generate: request " + std::to_string(i);
    if (q.prompt.empty()) return invalid_argument(which + ": the prompt has no tokens");
    for (size_t k = 0; k < q.prompt.size(); ++k)
      if (q.prompt[k] < 0 || q.prompt[k] >= V)
        return invalid_argument(which + ": token id " + std::to_string(q.prompt[k]) + " at " + std::to_string(k) +
                                " is outside the vocabulary [0, " + std::to_string(V) + ")");
    if (static_cast<int64_t>(q.prompt.size()) > max_length())
      return invalid_argument(which + ": the prompt has " + std::to_string(q.prompt.size()) +
                              " tokens, past the engine's limit of " + std::to_string(max_length()) +
                              " tokens per sequence (max_seq_len " + std::to_string(info_.max_seq_len) +
                              ", max_position_embeddings " + std::to_string(config_.max_position_embeddings) + ")");
    if (q.options.max_new_tokens < 0)
      return invalid_argument(which + ": max_new_tokens is " + std::to_string(q.options.max_new_tokens) + ", expected >= 0");
    if (Status s = validate_sampling(q.options.sampling); !s.ok()) return s.with_context(which);
    if (!q.options.stop_strings.empty() && !tokenizer_)
      return invalid_argument(which + ": stop strings need the engine's tokenizer, and none is loaded");
    for (const std::string& s : q.options.stop_strings)
      if (s.empty()) return invalid_argument(which + ": an empty stop string");
    const int64_t reserve = std::min<int64_t>(static_cast<int64_t>(q.prompt.size()) + q.options.max_new_tokens - 1, max_length());
    if (Status s = blocks_.check_fits(std::max<int64_t>(reserve, 1)); !s.ok()) return s.with_context(which);
    if (q.options.max_new_tokens == 0) continue;  // nothing to generate: an empty result
    waiting.push_back(i);
  }

  std::vector<std::unique_ptr<Sequence>> running;  // in admission order
  std::vector<float> row_logits(static_cast<size_t>(V));
  Status failure = Status::Ok();
  // Releases every row still held if the loop ends early, so the runner stays usable.
  auto release_all = [&]() {
    for (auto& s : running)
      if (blocks_.row_in_use(s->row)) (void)blocks_.release(s->row);
    running.clear();
  };

  while (!waiting.empty() || !running.empty()) {
    // Admission, FIFO: a request that does not fit yet keeps its place and holds back the later ones.
    while (!waiting.empty()) {
      const size_t i = waiting.front();
      const LlmRequest& q = requests[i];
      const int64_t reserve =
          std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(q.prompt.size()) + q.options.max_new_tokens - 1, max_length()));
      std::optional<int32_t> row = blocks_.try_admit(reserve);
      if (!row) break;
      auto s = std::make_unique<Sequence>(q.options.sampling);
      s->request = i;
      s->row = *row;
      s->ids = q.prompt;
      s->prompt_len = q.prompt.size();
      s->options = &q.options;
      s->eos = q.options.ignore_eos ? nullptr : q.options.eos_token_ids.empty() ? &default_eos : &q.options.eos_token_ids;
      results[i].admitted_ms = ms_since(t0);
      running.push_back(std::move(s));
      waiting.pop_front();
    }
    if (running.empty()) {
      release_all();
      return internal_error("generate: request " + std::to_string(waiting.front()) + " fits no empty KV pool");
    }

    // The step: one decode token of every sequence past its prompt, then prefill chunks in
    // admission order while the token budget lasts.
    struct Part {
      Sequence* seq;
      int64_t tokens;
    };
    std::vector<Part> parts;
    int64_t budget = N;
    for (auto& s : running)
      if (s->cached >= static_cast<int64_t>(s->prompt_len)) {
        parts.push_back({s.get(), 1});
        --budget;
      }
    for (auto& s : running) {
      if (s->cached >= static_cast<int64_t>(s->prompt_len)) continue;
      if (budget == 0) break;
      const int64_t left = static_cast<int64_t>(s->prompt_len) - s->cached;
      const int64_t n = std::min(left, budget);
      if (n < left) ++stats_.prefill_chunks;
      parts.push_back({s.get(), n});
      budget -= n;
    }
    const int64_t T = N - budget, Tp = bucket(T);
    Tensor ids(DataType::kInt64, {Tp}), pos(DataType::kInt64, {Tp}), seq(DataType::kInt32, {Tp});
    Tensor rows(DataType::kInt64, {R}), table(DataType::kInt32, {R, info_.max_blocks_per_seq});
    std::fill(seq.data<int32_t>(), seq.data<int32_t>() + Tp, -1);
    std::copy(blocks_.block_table().begin(), blocks_.block_table().end(), table.data<int32_t>());
    std::vector<bool> samples(parts.size(), false);
    int64_t k = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      Sequence& s = *parts[p].seq;
      for (int64_t j = 0; j < parts[p].tokens; ++j, ++k) {
        ids.data<int64_t>()[k] = s.ids[static_cast<size_t>(s.cached + j)];
        pos.data<int64_t>()[k] = s.cached + j;
        seq.data<int32_t>()[k] = s.row;
      }
      if (s.cached + parts[p].tokens == static_cast<int64_t>(s.ids.size())) {
        rows.data<int64_t>()[s.row] = k - 1;
        samples[p] = true;
      }
    }
    ++stats_.steps;
    stats_.tokens += T;
    stats_.padded_tokens += Tp - T;
    stats_.max_running = std::max<int64_t>(stats_.max_running, static_cast<int64_t>(running.size()));
    stats_.max_step_tokens = std::max(stats_.max_step_tokens, T);

    // A row whose token is the device's argmax: greedy without a repetition penalty.
    auto device_greedy = [&](const Sequence& s) {
      return dio_ && s.sampler.greedy() && s.options->sampling.repetition_penalty == 1.0;
    };
    auto ctx = context_for(Tp);
    if (!ctx.ok()) failure = ctx.status();
    StatusOr<Tensor> logits = Tensor{};
    if (dio_) {
      if (failure.ok()) {
        std::memcpy(dio_->ids, ids.raw(), static_cast<size_t>(Tp) * 8);
        std::memcpy(dio_->pos, pos.raw(), static_cast<size_t>(Tp) * 8);
        std::memcpy(dio_->seq, seq.raw(), static_cast<size_t>(Tp) * 4);
        std::memcpy(dio_->table, table.raw(), table.nbytes());
        std::memcpy(dio_->pools, pool_pointers_.raw(), pool_pointers_.nbytes());
        std::memcpy(dio_->rows, rows.raw(), rows.nbytes());
        std::vector<int32_t> sample_rows;
        if (dio_->sampler) dio_->sampler->clear_rows();
        for (size_t p = 0; p < parts.size(); ++p) {
          const Sequence& s = *parts[p].seq;
          if (!samples[p] || device_greedy(s)) continue;
          if (dio_->sampler)  // the new token's position: the Philox counter
            dio_->sampler->set_row(s.row, s.options->sampling, static_cast<int64_t>(s.ids.size()));
          else
            sample_rows.push_back(s.row);
        }
        if (sample_rows.empty()) ++stats_.argmax_only_steps;
        failure = run_device_step(*ctx, Tp, sample_rows);
      }
      if (!failure.ok()) logits = failure;
    } else {
      for (auto [name, t] : {std::pair<const char*, Tensor*>{kInputIds, &ids}, {kPositionIds, &pos}, {kTokenSeq, &seq},
                             {kBlockTable, &table}, {kKvPools, &pool_pointers_}, {kLogitRows, &rows}})
        if (failure.ok()) failure = (*ctx)->set_input(name, *t);
      if (failure.ok()) failure = (*ctx)->execute();
      logits = failure.ok() ? (*ctx)->output(kLogits) : StatusOr<Tensor>(failure);
    }
    if (!logits.ok()) {
      release_all();
      return logits.status().with_context("generate: step " + std::to_string(stats_.steps));
    }

    for (size_t p = 0; p < parts.size(); ++p) {
      Sequence& s = *parts[p].seq;
      s.cached += parts[p].tokens;
      if (!samples[p]) continue;
      int32_t tok = 0;
      if (device_greedy(s)) {
        const int64_t id = static_cast<const int64_t*>(dio_->next)[s.row];
        if (id < 0 || id >= V) {
          release_all();
          return internal_error("generate: request " + std::to_string(s.request) + ": the device's argmax at position " +
                                std::to_string(s.cached - 1) + " is " + std::to_string(id) + ", outside the vocabulary");
        }
        tok = static_cast<int32_t>(id);
      } else if (dio_ && dio_->sampler) {
        const int32_t id = dio_->sampler->token(s.row), bad = dio_->sampler->nonfinite(s.row);
        if (bad >= 0 || id < 0 || id >= V) {
          release_all();
          return internal_error("generate: request " + std::to_string(s.request) + ": " +
                                (bad >= 0 ? "the logits at position " + std::to_string(s.cached - 1) +
                                                " hold a non-finite value (id " + std::to_string(bad) + ")"
                                          : "the GPU sampler chose id " + std::to_string(id) + " at position " +
                                                std::to_string(s.cached - 1) + ", outside the vocabulary"));
        }
        tok = id;
        ++stats_.device_sampled_tokens;
      } else {
        const float* row = (dio_ ? dio_->logits_host : logits->data<float>()) + static_cast<int64_t>(s.row) * V;
        ++stats_.logits_rows_read;
        std::copy(row, row + V, row_logits.begin());
        for (int64_t i = 0; i < V; ++i)
          if (!std::isfinite(row_logits[static_cast<size_t>(i)])) {
            release_all();
            return internal_error("generate: request " + std::to_string(s.request) + ": the logits at position " +
                                  std::to_string(s.cached - 1) + " hold a non-finite value (id " + std::to_string(i) + ")");
          }
        apply_repetition_penalty(row_logits.data(), V, s.ids, s.options->sampling.repetition_penalty);
        tok = s.sampler.next(row_logits.data(), V);
      }
      s.ids.push_back(tok);
      LlmResult& res = results[s.request];
      res.tokens.push_back(tok);
      res.token_ms.push_back(ms_since(t0));
      if (s.eos && std::find(s.eos->begin(), s.eos->end(), tok) != s.eos->end()) {
        res.stop = StopReason::kEos;
        s.done = true;
      } else if (!s.options->stop_strings.empty()) {
        StatusOr<std::string> text = tokenizer_->decode(res.tokens);
        if (!text.ok()) {
          release_all();
          return text.status().with_context("generate: request " + std::to_string(s.request));
        }
        for (const std::string& stop : s.options->stop_strings)
          if (text->find(stop) != std::string::npos) {
            res.stop = StopReason::kStopString;
            s.done = true;
          }
      }
      if (!s.done && static_cast<int64_t>(res.tokens.size()) >= s.options->max_new_tokens) {
        res.stop = StopReason::kMaxNewTokens;
        s.done = true;
      }
      if (!s.done && s.cached + 1 > max_length()) {
        res.stop = StopReason::kMaxLength;
        s.done = true;
      }
      if (on_token) on_token(s.request, tok, s.done);
    }
    for (auto it = running.begin(); it != running.end();) {
      if ((*it)->done) {
        KILN_RETURN_IF_ERROR(blocks_.release((*it)->row));
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  }
  return results;
}

}  // namespace kiln::llm
