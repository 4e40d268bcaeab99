// crfx — CudaBackend (cuda_backend.cuh): construction, corpus upload, the workspace arena and its
// sizing, chunk planning, the front of every chunk (prepare, fill_rows, emissions, edge
// matrices, the forward-backward launch), and make_cuda_backend.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "chain_kernels.cuh"
#include "cuda_api.hpp"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "device_buffer.cuh"

namespace crfx::cuda {
namespace detail {
namespace {

/// A corpus's transposes (CudaCorpus): the state one, and with `edges` the edge one without the
/// items at each sentence's first token (transpose_items, on the host's threads).
struct Transposes {
  ItemTranspose st, et;
  Transposes(const Dims& dims, const Corpus& c, bool edges, unsigned threads)
      : st(transpose_items(dims.A, c.state_offsets, c.state_ids, c.state_values, nullptr, threads)) {
    if (!edges) return;
    std::vector<std::uint8_t> first(c.num_tokens(), 0);  // token opens its sentence
    for (std::size_t s = 0; s < c.num_sentences(); ++s)
      if (c.length(s)) first[c.sentence_offsets[s]] = 1;
    et = transpose_items(dims.E, c.edge_offsets, c.edge_ids, c.edge_values, &first, threads);
  }
};

}  // namespace

// ---- construction ----------------------------------------------------------------------------

CudaBackend::CudaBackend(const Dims& dims, const CudaBackendConfig& cfg) : Backend(dims), cfg_(cfg) {
  if (dims.L == 0) throw Error("a model needs at least one label");
  fb_mode_ = cfg.forward_backward;
  if (fb_mode_ == CudaBackendConfig::ForwardBackward::automatic)
    if (const char* env = std::getenv("CRFX_FB")) {
      const std::string v = env;
      if (v == "fused") fb_mode_ = CudaBackendConfig::ForwardBackward::fused;
      else if (v == "split") fb_mode_ = CudaBackendConfig::ForwardBackward::split;
      else if (v == "scan") fb_mode_ = CudaBackendConfig::ForwardBackward::scan;
      else if (v == "block") fb_mode_ = CudaBackendConfig::ForwardBackward::block;
      else if (v != "auto" && !v.empty()) throw Error("CRFX_FB: fused, split, scan, block or auto, not \"" + v + "\"");
    }
  if (dims.L > kMaxLabels)
    throw Error("the CUDA backend supports up to " + std::to_string(kMaxLabels) + " labels (model has " +
                std::to_string(dims.L) + "); use --device cpu");
  if (cfg_.max_chunk_tokens == 0)
    if (const char* env = std::getenv("CRFX_CHUNK_TOKENS")) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(env, &end, 10);
      if (!*env || *end || v == 0) throw Error(std::string("CRFX_CHUNK_TOKENS: a positive count, not \"") + env + "\"");
      cfg_.max_chunk_tokens = std::size_t(v);
    }
  if (const char* env = std::getenv("CRFX_STREAM")) {  // benchmarks: a streamed pass against a resident one
    const std::string v = env;
    if (v == "1") cfg_.always_stream = true;
    else if (v != "0" && !v.empty()) throw Error("CRFX_STREAM: 1 (stream every corpus) or 0, not \"" + v + "\"");
  }
  dims.check_layout();  // a sparse layout: the kernels index by its offsets and slots unchecked
  CRFX_CUDA_CHECK(cudaSetDevice(cfg.device));
  CRFX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {  // the destructor does not run for a constructor that throws: the stream is ours here
    name_ = "cuda:" + std::to_string(cfg.device) + " " + device_description(cfg.device);
    const std::size_t LL = std::size_t(dims.L) * dims.L;
    E_.resize(LL);
    Et_.resize(LL);
    zeros_.resize(LL);
    tmax_.resize(1);
    red_.resize(kRedBlocks + 1);
    CRFX_CUDA_CHECK(cudaMemsetAsync(zeros_.get(), 0, LL * sizeof(double), stream_));
    // The layout: a sparse one's rows go to the device once; the kernels read them through
    // dgroups_ (the same WeightGroups arithmetic as the host's, over the device copies).
    dgroups_ = dims.groups();
    max_state_row_ = dims.L;
    max_edge_row_ = LL;
    if (!dims.dense()) {
      upload_vector(layout_offsets_, dims.layout->offsets, stream_);
      upload_vector(layout_slots_, dims.layout->slots, stream_);
      dgroups_.offsets = layout_offsets_.get();
      dgroups_.slots = layout_slots_.get();
      const WeightGroups hg = dims.groups();
      max_state_row_ = max_edge_row_ = 0;
      for (std::uint32_t a = 0; a < dims.A; ++a) max_state_row_ = std::max(max_state_row_, hg.size(a));
      for (std::uint32_t e = 0; e < dims.E; ++e) max_edge_row_ = std::max(max_edge_row_, hg.size(hg.edge(e)));
      if (dims.transitions) trans_.resize(LL);
    }
    if (cfg.gather_counters) {
      gather_counters_.resize(1);
      CRFX_CUDA_CHECK(cudaMemsetAsync(gather_counters_.get(), 0, sizeof(GatherCountersDevice), stream_));
    }
    threads_ = int(std::min<std::size_t>(512, (dims.L + 31) / 32 * 32));
    shared_E_ = forward_backward_smem(int(dims.L), true, false) <= kSharedLimit;
    shared_pair_ = dims.L <= 32 && forward_backward_smem(int(dims.L), shared_E_, true) <= kSharedLimit;
    sync();
  } catch (...) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
    throw;
  }
}

CudaBackend::~CudaBackend() {
  if (copy_stream_) {
    cudaStreamSynchronize(copy_stream_);
    cudaStreamDestroy(copy_stream_);
  }
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

std::string CudaBackend::name() const { return name_; }

std::size_t CudaBackend::device_corpus_bytes(const Corpus& c, bool edges, std::size_t edge_items) const {
  const std::size_t N = c.num_tokens();
  const std::size_t offsets = c.sentence_offsets.size() + c.state_offsets.size() +
                              (edges ? c.edge_offsets.size() : 0);
  const std::size_t ids = 2 * c.state_ids.size() + (edges ? c.edge_ids.size() + edge_items : 0) + N;  // + labels
  const std::size_t vals = 2 * c.state_values.size() + (edges ? c.edge_values.size() : 0) +
                           (edges && !c.edge_values.empty() ? edge_items : 0);
  const std::size_t plans = GatherSegments::bytes_bound(dims_.A, c.state_ids.size(), max_state_row_) +
                            (edges ? GatherSegments::bytes_bound(dims_.E, edge_items, max_edge_row_) : 0);
  return offsets * sizeof(std::size_t) + ids * sizeof(std::uint32_t) + vals * sizeof(double) + N * sizeof(int) +
         plans;
}

namespace {
std::size_t longest_sentence(const Corpus& c) {
  std::size_t longest = 0;
  for (std::size_t s = 0; s < c.num_sentences(); ++s) longest = std::max(longest, c.length(s));
  return longest;
}
}  // namespace

std::size_t CudaBackend::upload_bytes(const Corpus& c) const {
  const bool edges = dims_.E > 0 && c.edge_offsets.size() == c.num_tokens() + 1;
  const std::size_t bytes = device_corpus_bytes(c, edges, c.edge_ids.size());  // edge items at first tokens included: a bound
  std::size_t free_b = 0, total_b = 0;
  CRFX_CUDA_CHECK(cudaSetDevice(cfg_.device));
  CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const std::size_t longest = longest_sentence(c);
  if (!streams(bytes, longest, free_b)) return bytes;
  std::size_t resident = 0, workspace = 0;
  stream_sizes(c, longest, free_b, resident, workspace);
  return resident;
}

std::size_t CudaBackend::memory_available() {
  CRFX_CUDA_CHECK(cudaSetDevice(cfg_.device));
  std::size_t free_b = 0, total_b = 0;
  CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const std::size_t limit = limit_ ? limit_ : cfg_.max_device_memory;
  return limit ? std::min(free_b, limit) : free_b;
}

void CudaBackend::set_memory_limits(std::size_t limit, std::size_t reserved, std::size_t host_limit) {
  limit_ = limit;
  reserved_ = reserved;
  host_limit_ = host_limit;
  limits_set_ = true;
}

// ---- data ------------------------------------------------------------------------------

BackendCorpusPtr CudaBackend::upload(const Corpus& c) { return upload_owned(Corpus(c)); }

BackendCorpusPtr CudaBackend::upload(Corpus&& c) { return upload_owned(std::move(c)); }

BackendCorpusPtr CudaBackend::upload_owned(Corpus&& in) {
  CRFX_CUDA_CHECK(cudaSetDevice(cfg_.device));
  const std::size_t N = in.num_tokens(), S = in.num_sentences();
  if (N >= std::size_t(std::numeric_limits<int>::max()))
    throw Error("the CUDA backend handles corpora of fewer than 2^31 tokens (" + std::to_string(N) + " given)");
  in.check_values();
  for (auto a : in.state_ids)
    if (a >= dims_.A) throw Error("internal: corpus attribute id beyond the model");
  for (auto e : in.edge_ids)
    if (e >= dims_.E) throw Error("internal: corpus edge attribute id beyond the model");
  for (auto y : in.labels)
    if (y != Corpus::kNoLabel && y >= dims_.L) throw Error("internal: corpus label beyond the model");
  auto up = std::make_unique<CudaCorpus>();
  static std::atomic<std::uint64_t> uploads{0};
  up->owner = this;
  up->serial = ++uploads;
  up->S = S;
  up->N = N;
  up->host = std::move(in);
  const Corpus& c = up->host;
  up->h_sent_off = c.sentence_offsets;
  up->h_labeled.assign(S, 1);
  const bool edges = dims_.E > 0 && c.edge_offsets.size() == N + 1;
  std::size_t edge_items = edges ? c.edge_ids.size() : 0;  // the edge transpose's: none at t = 0
  for (std::size_t s = 0; s < S; ++s) {
    up->max_len = std::max(up->max_len, c.length(s));
    if (edges && c.length(s)) {
      const std::size_t t0 = c.sentence_offsets[s];
      edge_items -= c.edge_offsets[t0 + 1] - c.edge_offsets[t0];
    }
    for (std::size_t t = c.sentence_offsets[s]; t < c.sentence_offsets[s + 1]; ++t)
      if (c.labels[t] == Corpus::kNoLabel) up->h_labeled[s] = 0;
  }

  // Device memory: the corpus, then the workspace (checked against what is free); a corpus that
  // does not fit beside the run's vectors (set_memory_limits) and its workspace is streamed.
  const std::size_t corpus_bytes = device_corpus_bytes(c, edges, edge_items);
  std::size_t free_b = 0, total_b = 0;
  CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  // Where the whole corpus's workspace takes at most half of what the copy leaves (as a bound,
  // the spare arrays held), nothing is cut into chunks by memory, whoever holds what: the arrays
  // go into the last corpus's (spare_) and the gathers wait for a gradient. Otherwise the spare
  // arrays are freed first and the corpus is copied whole, as it always was.
  const bool reuse = !streams(corpus_bytes, up->max_len, free_b) && ample(c, corpus_bytes, free_b);
  if (!reuse) {
    *spare_ = CorpusBuffers();
    CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (streams(corpus_bytes, up->max_len, free_b)) {
      const Transposes t(dims_, c, edges, cfg_.host_threads);
      upload_streamed(*up, t.st.off, t.st.tok, t.st.val, t.et.off, t.et.tok, t.et.val, edges);
      return up;
    }
  } else {
    static_cast<CorpusBuffers&>(*up) = std::move(*spare_);
    up->spare = spare_;
  }
  // Within a limit, the workspace takes what the copy leaves of it (else: what is free).
  const std::size_t budget = device_budget(free_b);
  workspace_cap_ = (limit_ || cfg_.max_device_memory) && budget > corpus_bytes ? budget - corpus_bytes : 0;
  upload_fitted(up->sent_off, c.sentence_offsets, stream_);
  upload_fitted(up->state_off, c.state_offsets, stream_);
  upload_fitted(up->state_ids, c.state_ids, stream_);
  upload_fitted(up->state_vals, c.state_values, stream_);
  upload_fitted(up->labels, c.labels, stream_);
  if (edges) {
    upload_fitted(up->edge_off, c.edge_offsets, stream_);
    upload_fitted(up->edge_ids, c.edge_ids, stream_);
    upload_fitted(up->edge_vals, c.edge_values, stream_);
  } else {
    up->edge_off.fit(0), up->edge_ids.fit(0), up->edge_vals.fit(0);
  }
  up->token_slot.fit(N);
  if (N) CRFX_CUDA_CHECK(cudaMemsetAsync(up->token_slot.get(), 0xff, N * sizeof(int), stream_));  // −1
  if (!reuse) {
    gathers(*up);  // (it syncs: the host vectors above must outlive the copies)
  } else {
    sync();
  }
  size_workspace(*up);
  workspace_cap_ = 0;
  return up;
}

bool CudaBackend::ample(const Corpus& c, std::size_t corpus_bytes, std::size_t free_b) const {
  std::size_t usable = free_b > corpus_bytes ? free_b - corpus_bytes : 0;
  const std::size_t budget = device_budget(free_b);
  if (limit_ || cfg_.max_device_memory) usable = std::min(usable, budget > corpus_bytes ? budget - corpus_bytes : 0);
  const std::size_t rows = std::max({std::size_t(1), c.num_tokens(), rows_cap_});
  const std::size_t sents = std::max({std::size_t(1), c.num_sentences(), sents_cap_});
  return 2 * (rows * row_bytes(dims_.E > 0) + sents * sentence_bytes()) <= usable;
}

void CudaBackend::gathers(const CudaCorpus& c) {
  if (c.gathers_built || c.stream) return;
  const bool edges = c.edge_off.get() != nullptr;
  const Transposes t(dims_, c.host, edges, cfg_.host_threads);
  const WeightGroups hg = dims_.groups();
  c.st_plan.build(dims_.A, t.st.off, [&](std::size_t a) { return hg.size(std::uint32_t(a)); }, stream_);
  upload_vector(c.st_tok, t.st.tok, stream_);
  upload_vector(c.st_val, t.st.val, stream_);
  if (edges) {
    c.et_plan.build(dims_.E, t.et.off, [&](std::size_t e) { return hg.size(hg.edge(std::uint32_t(e))); }, stream_);
    upload_vector(c.et_tok, t.et.tok, stream_);
    upload_vector(c.et_val, t.et.val, stream_);
  }
  sync();  // the host vectors above must outlive the copies
  c.gathers_built = true;
}

// ---- workspace -------------------------------------------------------------------------

std::size_t CudaBackend::row_bytes(bool edges) const {
  const std::size_t L = dims_.L;
  // The split forward-backward (L ≤ 32): per row a bound of its share of the segments' partial
  // pair sums (a sentence of T > kFbSegment positions has < 2T / kFbSegment segments) and entries.
  const std::size_t split = L <= 32 ? (2 * L * L * sizeof(double) + sizeof(FbSegment)) / kFbSegment + 1 : 0;
  return 4 * L * sizeof(double) + (L + 1) * sizeof(std::uint32_t) + sizeof(std::size_t) + 1 +
         (edges ? L * L * sizeof(double) : 0) + split;  // S, log α, log β, node; back, labels; row_token, row_edge; τ_t
}

std::size_t CudaBackend::sentence_bytes() const {
  const std::size_t LL = std::size_t(dims_.L) * dims_.L;
  return LL * sizeof(double) + (LL * sizeof(double)) / kTransGroup + sizeof(double) * 2 +
         2 * sizeof(std::uint32_t) + sizeof(std::size_t) +  // pair, tree, losses, sent/order, slots
         (dims_.L <= 32 ? sizeof(FbSegment) + sizeof(FbMulti) : 0);  // the split's work list
}

void CudaBackend::workspace_caps(std::size_t N, std::size_t S, std::size_t max_len, std::size_t usable,
                                 std::size_t& rows, std::size_t& sents) const {
  const std::size_t per_row = row_bytes(dims_.E > 0), per_sent = sentence_bytes();
  const std::size_t min_rows = std::max<std::size_t>(1, max_len);
  const std::size_t need_min = min_rows * per_row + per_sent;
  rows = std::max<std::size_t>(1, N);
  sents = std::max<std::size_t>(1, S);
  const std::size_t budget = std::max(need_min, usable / 2);
  if (rows * per_row + sents * per_sent > budget) {
    // Rows get half the budget but at least the longest sentence; sentences what rows leave
    // (at least per_sent, since budget ≥ need_min), so the total stays within the budget.
    rows = std::min(rows, std::max(min_rows, (budget / 2) / per_row));
    sents = std::max<std::size_t>(1, std::min(sents, (budget - rows * per_row) / per_sent));
  }
  if (cfg_.max_chunk_tokens) rows = std::max(min_rows, std::min(rows, cfg_.max_chunk_tokens));
}

std::size_t CudaBackend::workspace_bytes(const Corpus& c, SequenceLoss loss) const {
  // What size_workspace will allocate once the corpus's copy (upload_bytes) is made, with the
  // pointwise losses' per-position pairwise marginals (pointwise_rows: ≤ 256 MiB) and the split
  // forward-backward's partial pair sums (counted in row_bytes).
  std::size_t free_b = 0, total_b = 0;
  CRFX_CUDA_CHECK(cudaSetDevice(cfg_.device));
  CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const bool edges = dims_.E > 0 && c.edge_offsets.size() == c.num_tokens() + 1;
  const std::size_t longest = longest_sentence(c);
  const std::size_t copy = device_corpus_bytes(c, edges, c.edge_ids.size());
  std::size_t usable = free_b > copy ? free_b - copy : 0;
  if (streams(copy, longest, free_b)) {
    std::size_t resident = 0, workspace = 0;
    stream_sizes(c, longest, free_b, resident, workspace, pointwise_loss(loss) && !edges);
    return workspace;
  }
  if (limit_ || cfg_.max_device_memory) {
    const std::size_t budget = device_budget(free_b);
    usable = std::min(usable, budget > copy ? budget - copy : 0);
  }
  std::size_t rows = 0, sents = 0;
  workspace_caps(c.num_tokens(), c.num_sentences(), longest, usable, rows, sents);
  std::size_t bytes = rows * row_bytes(dims_.E > 0) + sents * sentence_bytes();
  if (pointwise_loss(loss) && dims_.E == 0) {
    const std::size_t LL = std::size_t(dims_.L) * dims_.L;
    const std::size_t pt = std::min(rows, std::max<std::size_t>(longest, (std::size_t(256) << 20) / (LL * sizeof(double))));
    bytes += pt * LL * sizeof(double);
  }
  return bytes;
}

void CudaBackend::size_workspace(const CudaCorpus& c) {
  const bool edges = dims_.E > 0;
  const std::size_t per_row = row_bytes(edges), per_sent = sentence_bytes();
  std::size_t free_b = 0, total_b = 0;
  CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const std::size_t have = (rows_cap_ * per_row + sents_cap_ * per_sent);  // already ours
  const std::size_t usable = workspace_cap_ ? std::min(free_b + have, workspace_cap_) : free_b + have;
  const std::size_t min_rows = std::max<std::size_t>(1, c.max_len);
  const std::size_t need_min = min_rows * per_row + per_sent;
  if (need_min > usable * 9 / 10)
    throw Error("CUDA backend: a sentence of " + std::to_string(c.max_len) + " tokens with L = " +
                std::to_string(dims_.L) + (edges ? " and edge features" : "") + " needs " +
                fmt_mib(need_min) + " of device workspace; only " + fmt_mib(free_b) + " free on " + name_ +
                "; use --device cpu");
  std::size_t rows = 0, sents = 0;
  workspace_caps(c.N, c.S, c.max_len, usable, rows, sents);
  rows = std::max(rows, rows_cap_);
  sents = std::max(sents, sents_cap_);
  if (rows == rows_cap_ && sents == sents_cap_) return;
  if (rows * per_row + sents * per_sent > usable * 9 / 10)  // grown caps of an earlier corpus
    throw Error("CUDA backend: the device workspace for this corpus needs " +
                fmt_mib(rows * per_row + sents * per_sent) + "; only " + fmt_mib(free_b) + " free on " +
                name_ + "; use --device cpu");
  // Every buffer is freed before its replacement is allocated (no doubled peak); should one
  // allocation fail, the whole workspace is released so that nothing runs on a half-sized one
  // (plan() then refuses), and the error propagates.
  const std::size_t L = dims_.L, LL = L * L;
  plan_key_.corpus = 0;  // new caps: the next chunk is planned and copied afresh
  plan_on_device_ = false;
  try {
    if (rows != rows_cap_) {
      rows_cap_ = 0;
      S_.resize(rows * L);
      la_.resize(rows * L);
      lb_.resize(rows * L);
      node_.resize(rows * L);
      back_.resize(rows * L);
      labels_.resize(rows);
      row_token_.resize(rows);
      row_edge_.resize(rows);
      if (edges) edge_.resize(rows * LL);
      rows_cap_ = rows;
    }
    if (sents != sents_cap_) {
      sents_cap_ = 0;
      pair_.resize(sents * LL);
      partial_.resize(((sents + kTransGroup - 1) / kTransGroup) * LL);
      losses_.resize(sents);
      sent_.resize(sents);
      order_.resize(sents);
      slots_.resize(sents + 1);
      sents_cap_ = sents;
    }
  } catch (...) {
    release_workspace();
    throw;
  }
}

void CudaBackend::release_workspace() noexcept {
  rows_cap_ = sents_cap_ = 0;
  plan_key_.corpus = 0;
  plan_on_device_ = false;
  S_.clear();
  la_.clear();
  lb_.clear();
  node_.clear();
  back_.clear();
  labels_.clear();
  row_token_.clear();
  row_edge_.clear();
  edge_.clear();
  pt_pair_.clear();
  seg_pair_.clear();
  seg_.clear();
  multi_.clear();
  pair_.clear();
  partial_.clear();
  losses_.clear();
  sent_.clear();
  order_.clear();
  slots_.clear();
}

// ---- chunks ------------------------------------------------------------------------------

std::size_t CudaBackend::plan(const CudaCorpus& c, SentenceSpan span, std::size_t begin,
                              std::size_t rows_limit) {
  if (rows_cap_ == 0 || sents_cap_ == 0)
    throw Error("CUDA backend: no device workspace (a device allocation failed earlier)");
  // The same chunk as the last plan's: its inputs decide it — the span's ids from `begin` up to
  // and including the one that ended it (or the span's end there), the limits and the corpus.
  PlanKey& k = plan_key_;
  if (k.corpus == c.serial && k.begin == begin && k.rows_limit == rows_limit &&
      (k.end == k.count ? span.count == k.count : span.count > k.end)) {
    bool same = true;
    for (std::size_t i = 0; i < k.ids.size() && same; ++i) same = span[begin + i] == k.ids[i];
    if (same) return k.end;
  }
  k.corpus = 0;  // invalid until this plan is complete
  plan_on_device_ = false;
  h_sent_.clear();
  h_slots_.assign(1, 0);
  // A sentence twice in one chunk would have two blocks race on its token slots: a repeat ends
  // the chunk, and the next chunk (a new generation of marks) starts with it.
  if (plan_mark_.size() < c.S) plan_mark_.assign(c.S, 0);
  if (++plan_gen_ == 0) {
    std::fill(plan_mark_.begin(), plan_mark_.end(), 0);
    plan_gen_ = 1;
  }
  std::size_t end = begin, rows = 0;
  while (end < span.count && h_sent_.size() < sents_cap_) {
    const std::uint32_t s = span[end];
    if (s >= c.S) throw Error("internal: sentence id beyond the corpus");
    if (plan_mark_[s] == plan_gen_) break;  // never the chunk's first: marks are per call
    const std::size_t T = c.h_sent_off[s + 1] - c.h_sent_off[s];
    if (rows + T > rows_cap_) {
      if (end == begin) throw Error("internal: sentence longer than the CUDA workspace");
      break;
    }
    if (rows + T > rows_limit && end > begin) break;
    plan_mark_[s] = plan_gen_;
    rows += T;
    h_sent_.push_back(s);
    h_slots_.push_back(rows);
    ++end;
  }
  // Consecutive sentence ids: the chunk's tokens are one range (the gathers read it directly).
  const std::size_t n = h_sent_.size();
  h_consecutive_ = true;
  for (std::size_t i = 1; i < n && h_consecutive_; ++i) h_consecutive_ = h_sent_[i] == h_sent_[i - 1] + 1;
  // Launch order: longest sentences first (the length buckets), ties in span order.
  h_order_.resize(n);
  std::iota(h_order_.begin(), h_order_.end(), 0u);
  std::stable_sort(h_order_.begin(), h_order_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return h_slots_[a + 1] - h_slots_[a] > h_slots_[b + 1] - h_slots_[b];
  });
  plan_segments();
  k.begin = begin;
  k.rows_limit = rows_limit;
  k.end = end;
  k.count = span.count;
  k.ids.resize(std::min(end + 1, span.count) - begin);
  for (std::size_t i = 0; i < k.ids.size(); ++i) k.ids[i] = span[begin + i];
  k.corpus = c.serial;
  return end;
}

void CudaBackend::plan_segments() {
  const std::size_t n = h_sent_.size();
  h_seg_.clear();
  h_multi_.clear();
  h_longest_ = n ? h_slots_[h_order_[0] + 1] - h_slots_[h_order_[0]] : 0;  // (longest first)
  std::uint32_t first = 0;
  h_scan_ = {};
  for (const std::uint32_t i : h_order_) {  // the longest sentences' segments first
    const std::size_t T = h_slots_[i + 1] - h_slots_[i];
    const std::uint32_t count = std::uint32_t(std::max<std::size_t>(1, (T + kFbSegment - 1) / kFbSegment));
    if (T >= scan_length()) {  // (a prefix of the order, and of the segments)
      ++h_scan_.sentences;
      h_scan_.segments += count;
    }
    if (count == 1) {
      h_seg_.push_back({i, 0, i});
      continue;
    }
    h_multi_.push_back({i, first, count});
    for (std::uint32_t k = 0; k < count; ++k) h_seg_.push_back({i, k * kFbSegment, std::uint32_t(n) + first + k});
    first += count;
  }
  h_partial_rows_ = first;
}

CorpusArrays CudaBackend::arrays(const CudaCorpus& c) const {
  CorpusArrays a;
  a.sent_off = c.sent_off.get();
  a.state_off = c.state_off.get();
  a.edge_off = c.edge_off.get();
  a.state_ids = c.state_ids.get();
  a.edge_ids = c.edge_ids.get();
  a.labels = c.labels.get();
  a.state_vals = c.state_vals.get();
  a.edge_vals = c.edge_vals.get();
  a.token_slot = const_cast<int*>(c.token_slot.get());
  a.st_tok = c.st_tok.get();
  a.et_tok = c.et_tok.get();
  a.st_val = c.st_val.get();
  a.et_val = c.et_val.get();
  a.st_plan = &c.st_plan;
  a.et_plan = &c.et_plan;
  a.ch = chunk_view();  // (a.fb unused: fb_work reads the plan's work list once it is on the device)
  a.t_lo = h_sent_.empty() ? 0 : c.h_sent_off[h_sent_[0]];
  return a;
}

DecodeInputs CudaBackend::decode_inputs(const CorpusArrays& a, const Vector& w) const {
  DecodeInputs in;
  in.L = int(dims_.L);
  in.sent_off = a.sent_off;
  in.edge_off = a.edge_off;
  in.ch = a.ch;
  in.S = S_.get();
  in.trans = trans_ptr(w);
  in.edge = a.edge_off ? edge_.get() : nullptr;
  in.independent = !dims_.transitions && !a.edge_off;
  return in;
}

void CudaBackend::prepare(const Vector& w) {
  if (w.size() != dims_.num_weights())
    throw Error("internal: weight vector has " + std::to_string(w.size()) + " entries, model needs " +
                std::to_string(dims_.num_weights()));
  if (dims_.transitions && !dims_.dense())  // τ: the transition row over zeros
    launch_dense_row(dgroups_, dims_.A, std::size_t(dims_.L) * dims_.L, P(w), trans_.get(), stream_);
  launch_prepare(int(dims_.L), trans_ptr(w), E_.get(), Et_.get(), tmax_.get(), stream_);
}

void CudaBackend::run_chunk_front(const CorpusArrays& a, const Vector& w, std::size_t n, std::size_t rows,
                                  bool slots, const bool* skip) {
  if (!a.streamed && !plan_on_device_ && n == 1) {  // one sentence (a stochastic step): written, not copied
    launch_one_sentence_chunk(h_sent_[0], h_slots_[1], sent_.get(), order_.get(), slots_.get(), stream_);
    plan_on_device_ = true;
  }
  if (!a.streamed && !plan_on_device_) {  // a plan reused (plan()) is still in the device's copies
    CRFX_CUDA_CHECK(cudaMemcpyAsync(sent_.get(), h_sent_.data(), n * sizeof(std::uint32_t),
                                    cudaMemcpyHostToDevice, stream_));
    CRFX_CUDA_CHECK(cudaMemcpyAsync(order_.get(), h_order_.data(), n * sizeof(std::uint32_t),
                                    cudaMemcpyHostToDevice, stream_));
    CRFX_CUDA_CHECK(cudaMemcpyAsync(slots_.get(), h_slots_.data(), (n + 1) * sizeof(std::size_t),
                                    cudaMemcpyHostToDevice, stream_));
    if (split_fb()) {  // the split forward-backward's work list (never needed otherwise)
      reserve_device(seg_, h_seg_.size());
      CRFX_CUDA_CHECK(cudaMemcpyAsync(seg_.get(), h_seg_.data(), h_seg_.size() * sizeof(FbSegment),
                                      cudaMemcpyHostToDevice, stream_));
      if (!h_multi_.empty()) {
        reserve_device(multi_, h_multi_.size());
        CRFX_CUDA_CHECK(cudaMemcpyAsync(multi_.get(), h_multi_.data(), h_multi_.size() * sizeof(FbMulti),
                                        cudaMemcpyHostToDevice, stream_));
      }
    }
    plan_on_device_ = true;
  }
  if (n == 0) return;
  const bool edges = a.edge_off != nullptr;
  launch_fill_rows(n, a.ch, a.sent_off, a.edge_off, row_token_.get(), row_edge_.get(),
                   slots ? a.token_slot : nullptr, stream_);
  slots_set_ = slots;  // launched: from here on the chunk's token slots need resetting
  if (rows == 0) return;
  const int L = int(dims_.L);
  launch_emission(L, rows, row_token_.get(), a.state_off, a.state_ids, a.state_vals, P(w), dgroups_, S_.get(),
                  stream_, skip);
  if (edges) {
    launch_edge_matrix(L, rows, row_token_.get(), row_edge_.get(), a.edge_off, a.edge_ids, a.edge_vals,
                       trans_ptr(w), P(w), dgroups_, edge_.get(), stream_, skip);
  }
}

FbParams CudaBackend::fb_params(const CorpusArrays& a, const Vector& w) const {
  FbParams fp{};
  fp.L = int(dims_.L);
  fp.sent_off = a.sent_off;
  fp.edge_off = a.edge_off;
  fp.labels = a.labels;
  fp.ch = a.ch;
  fp.S = S_.get();
  fp.trans = trans_ptr(w);
  fp.E = E_.get();
  fp.Et = Et_.get();
  fp.tmax = tmax_.get();
  fp.edge = a.edge_off ? edge_.get() : nullptr;
  fp.la = la_.get();
  fp.lb = lb_.get();
  fp.result = losses_.get();
  fp.shared_E = shared_E_;
  fp.shared_pair = shared_pair_;
  fp.independent = !dims_.transitions && !a.edge_off;
  if (cfg_.gather_counters) fp.longest_chain = &gather_counters_.get()->longest_chain;
  fp.scan_length = scan_length();
  return fp;
}

bool CudaBackend::split_fb(const FbWork& work) const {
  // A chunk of one sentence (a stochastic step) stays fused: its plan may be written on the
  // device without the work list, and a lone sentence has no other to wait for.
  if (dims_.L > 32 || work.sentences < 2) return false;
  switch (fb_mode_) {
    case CudaBackendConfig::ForwardBackward::fused: return false;
    case CudaBackendConfig::ForwardBackward::split:
    case CudaBackendConfig::ForwardBackward::scan: return true;
    default: return work.longest >= kFbSplitLength;  // automatic, block
  }
}

void CudaBackend::launch_fb(const FbParams& fp, std::size_t n, const FbWork& work) {
  if (n == 0) return;
  if (!fp.backward || (fp.independent && !fp.pair) || !split_fb(work)) {
    launch_forward_backward(fp, n, threads_, fb_mode_ != CudaBackendConfig::ForwardBackward::block, stream_);
    return;
  }
  // (A streamed corpus's is reserved at upload for its largest chunk: no allocation here.)
  if (fp.pair) reserve_device(seg_pair_, work.partial_rows * dims_.L * dims_.L);
  const FbSegments sg{work.seg, work.segs, work.multi, work.multis, seg_pair_.get()};
  launch_forward_backward_split(fp, n, sg, work.scan, stream_);
}

}  // namespace detail

std::unique_ptr<Backend> make_cuda_backend(const Dims& dims, const CudaBackendConfig& config) {
  return std::make_unique<detail::CudaBackend>(dims, config);
}

}  // namespace crfx::cuda
