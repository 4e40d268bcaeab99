// crfx — CPU backend.
//
// evaluate() runs in two phases per chunk of sentences, so that the gradient is a fixed-order
// sum whatever the number of threads:
//   1. per sentence (parallel, dynamic): emissions s = X·W, forward-backward, loss, and the
//      deltas  node_delta [t][L] = p_t − 1(gold),  pair_delta [s][L][L] = Σ_t p_t(y',y) − 1(gold),
//      edge_delta [t][L][L] (when enriched edge features fire);
//   2. the marginal reduction g += scale · Xᵀ·delta (parallel): worker k owns a contiguous range
//      of attribute ids and scans the chunk's tokens in order, so each weight receives its
//      contributions in token order, by one thread.
#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_sparse.hpp"
#include "cpu/cpu_vector.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "crfx/errors.hpp"

namespace crfx {

using cpu_detail::check_same;
using cpu_detail::CpuVector;
using cpu_detail::V;

namespace cpu_detail {

struct CpuCorpus final : BackendCorpus {
  Corpus c;
  // The marginal reduction's plan, made by its first use (plan_reduction), not by upload: a
  // corpus only tagged (a batch of crfx tag) never needs it.
  mutable std::once_flag planned;
  // Attribute ranges of the reduction phase, balanced by occurrence count: [parts + 1].
  mutable std::vector<std::uint32_t> state_bounds, edge_bounds;
  // With several parts, each part's own state items (those of its attribute range) in token
  // order, so that a worker of the reduction reads its items instead of testing everyone's (a
  // branch the CPU mispredicts on about half of them with two parts): [parts]; empty with one part
  // (or a token of more than 65,535 items). One copy of the items in all, 2 bytes per token and
  // part: CpuBackend::upload_bytes.
  struct PartItems {
    std::vector<std::uint32_t> ids;
    std::vector<double> values;                 // empty: every value 1
    std::vector<std::uint16_t> counts;          // [tokens] the part's items of each token
    std::vector<std::size_t> sentence_offsets;  // [sentences + 1] the first item of each sentence
  };
  mutable std::vector<PartItems> parts;
  std::size_t num_sentences() const override { return c.num_sentences(); }
  std::size_t num_tokens() const override { return c.num_tokens(); }
};

const CpuCorpus& cpu_corpus(const BackendCorpus& b) {
  auto* p = dynamic_cast<const CpuCorpus*>(&b);
  if (!p) throw Error("internal: corpus does not belong to the CPU backend");
  return *p;
}

}  // namespace cpu_detail

using cpu_detail::cpu_corpus;
using cpu_detail::CpuCorpus;

namespace {


/// Splits [0, n_ids) into `parts` ranges holding about equal numbers of occurrences.
std::vector<std::uint32_t> balanced_bounds(const std::vector<std::uint32_t>& ids,
                                           std::size_t n_ids, unsigned parts) {
  if (parts == 1) return {0, std::uint32_t(n_ids)};
  std::vector<std::size_t> count(n_ids + 1, 0);
  for (auto a : ids) ++count[a];
  std::vector<std::uint32_t> bounds{0};
  const double per_part = double(ids.size()) / parts;
  std::size_t acc = 0;
  for (std::size_t a = 0; a < n_ids && bounds.size() < parts; ++a) {
    acc += count[a];
    if (acc >= per_part * double(bounds.size())) bounds.push_back(std::uint32_t(a + 1));
  }
  while (bounds.size() <= parts) bounds.push_back(std::uint32_t(n_ids));
  bounds.back() = std::uint32_t(n_ids);
  return bounds;
}

// evaluate's chunk buffers (node, pair and edge deltas): 32 MB, or room for 4 sentences' L² pair
// deltas a thread where that is more (thousands of labels), at most 256 MB. Chunks do not change
// the result — every gradient entry is summed over the span's sentences in span order whatever
// the chunks — only the memory (a whole CoNLL-2000 pass held 72 MB of deltas) and how often the
// pool starts.
constexpr std::size_t kChunkMinBytes = std::size_t(32) << 20;
constexpr std::size_t kChunkMaxBytes = std::size_t(256) << 20;
std::size_t chunk_bytes(const Dims& dims, unsigned threads) {
  const std::size_t pair = std::size_t(dims.L) * dims.L * sizeof(double);
  return std::min(kChunkMaxBytes, std::max(kChunkMinBytes, 4 * std::size_t(threads) * pair));
}
// Below this many tokens the marginal reduction runs on the calling thread (see evaluate).
constexpr std::size_t kSerialReduceTokens = 1024;
// n-best decoding: the most a worker's [T][L][n] tables may take (a policy, not a measurement).
constexpr double kNbestMaxGiB = 4.0;

/// v holds at least n entries, its contents dropped: a larger need frees v first and allocates n
/// exactly (a vector's resize would allocate up to twice its old size, beside the old block).
void grow_exact(std::vector<double>& v, std::size_t n) {
  if (v.size() >= n) return;
  std::vector<double>().swap(v);
  v.resize(n);
}

/// Where each sentence of `span` starts in span-ordered per-token outputs: [span.count + 1].
std::vector<std::size_t> span_offsets(const Corpus& c, SentenceSpan span) {
  std::vector<std::size_t> offset(span.count + 1, 0);
  for (std::size_t i = 0; i < span.count; ++i) offset[i + 1] = offset[i] + c.length(span[i]);
  return offset;
}

}  // namespace

HostArray& CpuBackend::data(Vector& v) { return V(v); }
const HostArray& CpuBackend::data(const Vector& v) { return V(v); }
const Corpus& CpuBackend::corpus_of(const BackendCorpus& c) { return cpu_corpus(c).c; }

CpuBackend::CpuBackend(const Dims& dims, unsigned threads, bool log_space_only)
    : Backend(dims), pool_(threads), log_space_only_(log_space_only) {
  if (dims.L == 0) throw Error("a model needs at least one label");
  for (unsigned i = 0; i < pool_.size(); ++i) work_.push_back(std::make_unique<Work>());
  const std::size_t per_token = dims.L + (dims.E ? std::size_t(dims.L) * dims.L : 0);
  chunk_doubles_ = chunk_bytes(dims, pool_.size()) / sizeof(double);
  chunk_tokens_ = std::max<std::size_t>(1, chunk_doubles_ / per_token);
  const WeightGroups wg = dims.groups();
  if (!wg.dense() && dims.L <= kRowMaxLabels && cpu_rows_avx512()) row_masks_ = row_lane_masks(wg);
}

SparseRows CpuBackend::rows(const Corpus& c) const {
  const WeightGroups wg = dims_.groups();
  SparseRows r;
  r.L = dims_.L;
  r.offsets = wg.offsets;
  r.slots = wg.slots;
  r.masks = row_masks_.data();
  r.item_offsets = c.state_offsets.data();
  r.ids = c.state_ids.data();
  r.values = c.state_values.empty() ? nullptr : c.state_values.data();
  return r;
}

CpuBackend::~CpuBackend() = default;

std::size_t CpuBackend::workspace_bytes(const Corpus& corpus, SequenceLoss loss) const {
  const std::size_t L = dims_.L, LL = L * L, T = corpus.num_tokens(), S = corpus.num_sentences();
  std::size_t longest = 0;
  for (std::size_t s = 0; s < S; ++s) longest = std::max(longest, corpus.length(s));
  // evaluate's chunk (bounded by chunk_bytes, or the whole corpus when smaller; at least the
  // longest sentence's) — the pointwise losses hold per-position pairwise marginals, as edges do …
  const bool per_position = dims_.E || pointwise_loss(loss);
  const std::size_t chunk = std::max(std::min(chunk_bytes(dims_, pool_.size()), (T * (L + (per_position ? LL : 0)) + S * LL) * sizeof(double)),
                                     (longest * (L + (per_position ? LL : 0)) + LL) * sizeof(double));
  // … and each worker's scratch: scores, α, β, scaled emissions of its longest sentence (and
  // per-position edge matrices), the transition factors and pair buffers (about 8 L²); a loss
  // other than seq-log has sequence_loss's scratch besides (its own forward-backward scratch and
  // three more [T][L] arrays).
  std::size_t per_thread = (4 * longest * L + (dims_.E ? longest * LL : 0) + 8 * LL) * sizeof(double);
  if (loss != SequenceLoss::seq_log) per_thread += (7 * longest * L + 8 * LL) * sizeof(double);
  // … and the lane masks of the vector row code (one per attribute, sparse_rows.hpp).
  return chunk + pool_.size() * per_thread + row_masks_.size() * sizeof(std::uint64_t);
}

std::string CpuBackend::name() const {
  return "cpu (" + std::to_string(pool_.size()) + (pool_.size() == 1 ? " thread)" : " threads)");
}

BackendCorpusPtr CpuBackend::upload(const Corpus& corpus) { return upload(Corpus(corpus)); }

BackendCorpusPtr CpuBackend::upload(Corpus&& taken) {
  auto up = std::make_unique<CpuCorpus>();
  up->c = std::move(taken);
  const Corpus& corpus = up->c;
  corpus.check_values();
  for (auto a : corpus.state_ids)
    if (a >= dims_.A) throw Error("internal: corpus attribute id beyond the model");
  for (auto e : corpus.edge_ids)
    if (e >= dims_.E) throw Error("internal: corpus edge attribute id beyond the model");
  for (auto y : corpus.labels)
    if (y != Corpus::kNoLabel && y >= dims_.L) throw Error("internal: corpus label beyond the model");
  return up;
}

namespace {
/// The reduction's attribute ranges and per-part item lists of `cc` for `parts` workers (CpuCorpus).
void plan_reduction(const CpuCorpus& cc, const Dims& dims, unsigned parts) {
  std::call_once(cc.planned, [&] {
    const Corpus& corpus = cc.c;
    cc.state_bounds = balanced_bounds(corpus.state_ids, dims.A, parts);
    cc.edge_bounds = balanced_bounds(corpus.edge_ids, dims.E, parts);
    std::size_t most_items = 0;
    for (std::size_t t = 0; t < corpus.num_tokens(); ++t)
      most_items = std::max(most_items, corpus.state_offsets[t + 1] - corpus.state_offsets[t]);
    if (parts == 1 || most_items > 0xffff) return;
    const auto& bounds = cc.state_bounds;
    auto part_of = [&](std::uint32_t a) { return std::upper_bound(bounds.begin() + 1, bounds.end(), a) - bounds.begin() - 1; };
    // Each part's items counted first, so that its lists are allocated at their size once (grown
    // item by item they would hold up to twice the corpus's items: CpuBackend::upload_bytes).
    std::vector<std::size_t> items(parts, 0);
    for (const std::uint32_t a : corpus.state_ids) ++items[part_of(a)];
    cc.parts.resize(parts);
    for (unsigned q = 0; q < parts; ++q) {
      CpuCorpus::PartItems& part = cc.parts[q];
      part.ids.reserve(items[q]);
      if (!corpus.state_values.empty()) part.values.reserve(items[q]);
      part.counts.assign(corpus.num_tokens(), 0);
      part.sentence_offsets.reserve(corpus.num_sentences() + 1);
      part.sentence_offsets.assign(1, 0);
    }
    for (std::size_t s = 0; s < corpus.num_sentences(); ++s) {
      for (std::size_t t = corpus.sentence_offsets[s]; t < corpus.sentence_offsets[s + 1]; ++t)
        for (std::size_t k = corpus.state_offsets[t]; k < corpus.state_offsets[t + 1]; ++k) {
          const std::uint32_t a = corpus.state_ids[k];
          auto& part = cc.parts[part_of(a)];
          part.ids.push_back(a);
          if (!corpus.state_values.empty()) part.values.push_back(corpus.state_values[k]);
          ++part.counts[t];
        }
      for (auto& part : cc.parts) part.sentence_offsets.push_back(part.ids.size());
    }
  });
}
}  // namespace

std::size_t CpuBackend::upload_bytes(const Corpus& corpus) const {
  // The backend takes the corpus over as it is; with several threads, CpuCorpus::parts.
  if (pool_.size() == 1) return 0;
  return corpus.state_ids.size() * sizeof(std::uint32_t) + corpus.state_values.size() * sizeof(double) +
         pool_.size() * (corpus.num_tokens() * sizeof(std::uint16_t) + (corpus.num_sentences() + 1) * sizeof(std::size_t));
}

// ---- batch primitives ----------------------------------------------------------------------

void CpuBackend::prepare(const Vector& w, Prepared& p) {
  if (w.size() != dims_.num_weights())
    throw Error("internal: weight vector has " + std::to_string(w.size()) + " entries, model needs " +
                std::to_string(dims_.num_weights()));
  const std::size_t LL = std::size_t(dims_.L) * dims_.L;
  p.W = V(w).data();
  if (dims_.transitions && dims_.dense()) {
    p.trans = p.W + dims_.transition_offset();
  } else {  // zeros, and the observed bigrams' weights in their places
    p.dense_trans.assign(LL, 0.0);
    if (dims_.transitions)
      for_each_weight(dims_.groups(), dims_.A, [&](std::size_t k, std::size_t j) { p.dense_trans[j] = p.W[k]; });
    p.trans = p.dense_trans.data();
  }
  const std::size_t L = dims_.L, P = chain_stride(L), LP = L * P;
  exp_trans_.assign(2 * LL + 2 * LP, 0.0);  // [E | Eᵀ | E, Eᵀ with rows padded to P (chain.hpp)]
  p.trans_max = *std::max_element(p.trans, p.trans + LL);
  if (!std::isfinite(p.trans_max)) p.trans_max = 0;
  double* padded = exp_trans_.data() + 2 * LL;
  for (std::size_t i = 0; i < L; ++i)
    for (std::size_t j = 0; j < L; ++j)
      padded[LP + j * P + i] = padded[i * P + j] = exp_trans_[LL + j * L + i] = exp_trans_[i * L + j] =
          std::exp(p.trans[i * L + j] - p.trans_max);
}

ChainScores CpuBackend::scores(const Corpus& c, const Prepared& p, std::size_t s, Work& work) const {
  const std::size_t L = dims_.L, LL = L * L;
  const std::size_t tok0 = c.sentence_offsets[s], T = c.length(s);
  const WeightGroups wg = dims_.groups();
  if (!row_masks_.empty()) {  // observed pairs, AVX-512 (sparse_rows.hpp): every lane written
    work.state.resize(T * L);
    row_emissions_avx512(rows(c), tok0, T, p.W, work.state.data());
  } else {
    work.state.assign(T * L, 0.0);
  }
  // Emissions: s_t(y) = Σ_a x_{t,a} · w[a·L + y]   (L contiguous weights per active attribute).
  // The rows are scattered over a weight vector far larger than the caches: the row kPrefetch
  // items ahead is requested while this one is summed, so the misses overlap (same sums).
  constexpr std::size_t kPrefetch = kPrefetchItems;
  const std::size_t row_bytes = L * sizeof(double), items_end = c.state_offsets[tok0 + T];
  if (!wg.dense() && row_masks_.empty()) {  // observed pairs: s_t(y) += x · w[k] over a's row
    const std::uint32_t* ids = c.state_ids.data();
    const double* values = c.state_values.empty() ? nullptr : c.state_values.data();
    const std::size_t* offsets = wg.offsets;
    const std::uint32_t* slots = wg.slots;
    const double* W = p.W;
    for (std::size_t t = 0; t < T; ++t) {
      double* st = work.state.data() + t * L;
      for (std::size_t k = c.state_offsets[tok0 + t]; k < c.state_offsets[tok0 + t + 1]; ++k) {
        // Two stages: the row offset 2·kPrefetch items ahead (its address is a sequential read),
        // then the row itself kPrefetch ahead, whose offset is in the cache by then.
        if (k + 2 * kPrefetch < items_end) __builtin_prefetch(offsets + ids[k + 2 * kPrefetch]);
        if (k + kPrefetch < items_end) {
          const std::size_t ahead = offsets[ids[k + kPrefetch]];
          __builtin_prefetch(W + ahead);
          __builtin_prefetch(slots + ahead);
        }
        const std::size_t j0 = offsets[ids[k]], j1 = offsets[ids[k] + 1];
        if (values) {
          const double v = values[k];
          for (std::size_t j = j0; j < j1; ++j) st[slots[j]] += v * W[j];
        } else {  // binary attributes: v · w = w
          for (std::size_t j = j0; j < j1; ++j) st[slots[j]] += W[j];
        }
      }
    }
  }
  for (std::size_t t = 0; t < T && wg.dense(); ++t) {
    double* st = work.state.data() + t * L;
    for (std::size_t k = c.state_offsets[tok0 + t]; k < c.state_offsets[tok0 + t + 1]; ++k) {
      if (k + kPrefetch < items_end) {
        const char* ahead = reinterpret_cast<const char*>(p.W + std::size_t(c.state_ids[k + kPrefetch]) * L);
        for (std::size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(ahead + b);
        __builtin_prefetch(ahead + row_bytes - 1);
      }
      const double v = c.state_value(k);
      const double* row = p.W + std::size_t(c.state_ids[k]) * L;
      for (std::size_t y = 0; y < L; ++y) st[y] += v * row[y];
    }
  }
  ChainScores x;
  x.T = T;
  x.L = L;
  x.state = work.state.data();
  x.trans = p.trans;
  x.exp_trans = exp_trans_.data();
  x.exp_trans_t = exp_trans_.data() + L * L;
  x.exp_trans_padded = exp_trans_.data() + 2 * L * L;
  x.trans_max = p.trans_max;
  if (dims_.E > 0) {
    // Enriched edges: τ_t = τ + Σ_e x_{t,e} · w_e  at positions t ≥ 1 where edge items fire.
    bool any = false;
    work.edge_ptr.assign(T, nullptr);
    work.edge.resize(T * LL);
    const double* WE = p.W + dims_.edge_offset();
    for (std::size_t t = 1; t < T; ++t) {
      const std::size_t b = c.edge_offsets[tok0 + t], e = c.edge_offsets[tok0 + t + 1];
      if (b == e) continue;
      double* M = work.edge.data() + t * LL;
      std::copy(p.trans, p.trans + LL, M);
      for (std::size_t k = b; k < e; ++k) {
        const double v = c.edge_value(k);
        if (!wg.dense()) {
          for_each_weight(wg, wg.edge(c.edge_ids[k]), [&](std::size_t q, std::size_t j) { M[j] += v * p.W[q]; });
          continue;
        }
        const double* blk = WE + std::size_t(c.edge_ids[k]) * LL;
        for (std::size_t i = 0; i < LL; ++i) M[i] += v * blk[i];
      }
      work.edge_ptr[t] = M;
      any = true;
    }
    if (any) x.edge = work.edge_ptr.data();
  }
  // No transitions and no edge matrix (a Maxent model): O(L) per position, not O(L²).
  x.independent = !dims_.transitions && !x.edge;
  return x;
}

double CpuBackend::evaluate(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                            Vector* grad, double scale, SequenceLoss loss_kind) {
  const CpuCorpus& cc = cpu_corpus(bc);
  if (grad && grad->size() != dims_.num_weights()) throw Error("internal: gradient size mismatch");
  Prepared p;
  prepare(w, p);
  double* G = grad ? V(*grad).data() : nullptr;
  // A pointwise loss's gradient needs each position's pairwise marginals (L² per token), as edge
  // features do: the same per-token buffer.
  const bool per_position = dims_.E || pointwise_loss(loss_kind);
  double loss = 0;
  for (std::size_t begin = 0; begin < span.count;) {
    const Chunk chunk = plan_chunk(cc.c, span, begin, per_position, G != nullptr);
    chunk_sentences(cc.c, p, chunk, loss_kind, G != nullptr);  // phase 1
    for (std::size_t i = 0; i < chunk.n; ++i) loss += losses_[i];
    if (G) reduce_chunk(cc, chunk, scale, G);  // phase 2
    begin += chunk.n;
  }
  return loss;
}

CpuBackend::Chunk CpuBackend::plan_chunk(const Corpus& c, SentenceSpan span, std::size_t begin,
                                         bool per_position, bool gradient) {
  // Sentences [begin, end) of the span, holding at most chunk_tokens_ tokens and chunk_bytes of
  // buffers: per token L node deltas (and L² edge deltas), per sentence L² pair deltas — with
  // thousands of labels the per-sentence L² dominate (2,000 labels: 32 MB each).
  const std::size_t L = dims_.L, LL = L * L, per_token = L + (per_position ? LL : 0);
  Chunk chunk{span, begin, 0, 0};
  slots_.assign(1, 0);
  for (std::size_t end = begin; end < span.count; ++end) {
    const std::size_t T = c.length(span[end]);
    const std::size_t held = (chunk.tokens + T) * per_token + (chunk.n + 1) * LL;
    if (chunk.n > 0 && (chunk.tokens + T > chunk_tokens_ || held > chunk_doubles_)) break;
    chunk.tokens += T;
    slots_.push_back(chunk.tokens);
    ++chunk.n;
  }
  losses_.resize(chunk.n);
  if (gradient) {
    grow_exact(node_delta_, chunk.tokens * L);
    grow_exact(pair_delta_, chunk.n * LL);
    if (per_position) grow_exact(edge_delta_, chunk.tokens * LL);
  }
  return chunk;
}

void CpuBackend::chunk_sentences(const Corpus& c, const Prepared& p, const Chunk& chunk,
                                 SequenceLoss loss_kind, bool gradient) {
  std::atomic<bool> stopped{false};
  pool_.run(chunk.n, [&](std::size_t i, unsigned worker) {
    if (stopped.load(std::memory_order_relaxed) || stop_requested(1)) {  // the rest of the chunk skipped
      stopped.store(true, std::memory_order_relaxed);
      return;
    }
    losses_[i] = sentence_deltas(c, p, chunk.sentence(i), i, loss_kind, gradient, *work_[worker]);
  });
  if (stopped) throw PassStopped();
}

double CpuBackend::sentence_deltas(const Corpus& c, const Prepared& p, std::size_t s, std::size_t i,
                                   SequenceLoss loss_kind, bool gradient, Work& work) {
  const std::size_t L = dims_.L, LL = L * L;
  const ChainScores x = scores(c, p, s, work);
  const std::uint32_t* y = gold_labels(c, s, work);
  double* node = gradient ? node_delta_.data() + slots_[i] * L : nullptr;
  double* pair = gradient ? pair_delta_.data() + i * LL : nullptr;
  if (pair) std::fill(pair, pair + LL, 0.0);
  if (loss_kind != SequenceLoss::seq_log) {  // chain_loss.hpp: value and exact gradient
    LossGradient g;
    if (gradient) {
      g.node = node;
      if (dims_.transitions) g.pair_sum = pair;
      // Per position: the edge deltas, or the pointwise sweeps' pairwise marginals (unread).
      if (x.edge || pointwise_loss(loss_kind)) g.pair_at = edge_delta_.data() + slots_[i] * LL;
    }
    return sequence_loss(loss_kind, x, y, g, work.loss, log_space_only_).value;
  }
  if (!gradient) return log_partition(x, work.chain, log_space_only_) - path_score(x, y);
  double* edge = x.edge ? edge_delta_.data() + slots_[i] * LL : nullptr;
  // Without transitions the pairwise sums feed no weight: not asked for (no L² per position).
  ChainOutputs out{node, dims_.transitions ? pair : nullptr, edge};
  const double loss = forward_backward(x, out, work.chain, log_space_only_) - path_score(x, y);
  // The marginals less the gold path's indicators: node, pair and edge deltas.
  for (std::size_t t = 0; t < x.T; ++t) {
    node[t * L + y[t]] -= 1.0;
    if (t == 0) continue;
    pair[y[t - 1] * L + y[t]] -= 1.0;
    if (edge) edge[t * LL + y[t - 1] * L + y[t]] -= 1.0;
  }
  if (edge) std::fill(edge, edge + LL, 0.0);  // no edge features at t = 0
  return loss;
}

const std::uint32_t* CpuBackend::gold_labels(const Corpus& c, std::size_t s, Work& work) {
  const std::size_t tok0 = c.sentence_offsets[s], T = c.length(s);
  work.gold.resize(T);
  for (std::size_t t = 0; t < T; ++t) {
    work.gold[t] = c.labels[tok0 + t];
    if (work.gold[t] == Corpus::kNoLabel)
      throw Error("sentence " + std::to_string(s) + " has tokens without a label");
  }
  return work.gold.data();
}

namespace {

/// One worker's share of the marginal reduction: a range of state and of edge attribute ids, and
/// the state items it scans — its own list (several workers), or the corpus's tested against the
/// range (one worker, or tokens of too many items for the lists: CpuCorpus::parts).
struct ReductionPart {
  const CpuCorpus::PartItems* own = nullptr;
  const std::uint32_t* ids = nullptr;
  const double* values = nullptr;  // null: every value 1
  std::uint32_t lo = 0, hi = 0;    // the state ids it tests against (all of them with its own list)
  std::uint32_t elo = 0, ehi = 0;  // the edge ids it owns

  ReductionPart(const CpuCorpus& cc, std::size_t part, std::uint32_t A)
      : own(cc.parts.empty() ? nullptr : &cc.parts[part]),
        ids(own ? own->ids.data() : cc.c.state_ids.data()),
        lo(own ? 0 : cc.state_bounds[part]),
        hi(own ? A : cc.state_bounds[part + 1]),
        elo(cc.edge_bounds[part]),
        ehi(cc.edge_bounds[part + 1]) {
    const std::vector<double>& value_list = own ? own->values : cc.c.state_values;
    values = value_list.empty() ? nullptr : value_list.data();
  }
  /// Sentence s's state items among ids: [first, end).
  std::size_t first(const Corpus& c, std::size_t s) const {
    return own ? own->sentence_offsets[s] : c.state_offsets[c.sentence_offsets[s]];
  }
  std::size_t end(const Corpus& c, std::size_t s) const {
    return own ? own->sentence_offsets[s + 1] : c.state_offsets[c.sentence_offsets[s + 1]];
  }
  /// The number of token t's state items among ids.
  std::size_t count(const Corpus& c, std::size_t t) const {
    return own ? own->counts[t] : c.state_offsets[t + 1] - c.state_offsets[t];
  }
};

/// The part's share of the transition weights, g += scale · Σ pair deltas, summed over the
/// chunk's n sentences in span order.
void reduce_transitions(const WeightGroups& wg, std::size_t L, const double* pair_delta, std::size_t n,
                        std::size_t part, unsigned parts, double scale, double* G) {
  const std::size_t LL = L * L, b = wg.begin(wg.transitions()), size = wg.size(wg.transitions());
  const std::size_t k0 = b + size * part / parts, k1 = b + size * (part + 1) / parts;
  for (std::size_t i = 0; i < n; ++i) {
    const double* d = pair_delta + i * LL;
    if (wg.dense()) {
      for (std::size_t k = k0; k < k1; ++k) G[k] += scale * d[k - b];
    } else {
      for (std::size_t k = k0; k < k1; ++k) G[k] += scale * d[wg.slots[k]];
    }
  }
}

/// The part's state items of sentence s (tokens from tok0, node deltas [T][L]): g += scale ·
/// x · delta, token by token (the scalar code; sparse_rows.hpp's row_reduce_avx512 the vector).
void reduce_state_items(const Corpus& c, const WeightGroups& wg, std::size_t L, const ReductionPart& part,
                        std::size_t s, const double* node_delta, double scale, double* G) {
  const std::size_t tok0 = c.sentence_offsets[s], T = c.length(s), items_end = part.end(c, s);
  const std::uint32_t* ids = part.ids;
  std::size_t token_end = part.first(c, s);  // the end of token t's items
  for (std::size_t t = 0; t < T; ++t) {
    const double* d = node_delta + t * L;
    const std::size_t token_begin = token_end;
    token_end = token_begin + part.count(c, tok0 + t);
    for (std::size_t k = token_begin; k < token_end; ++k) {
      const std::uint32_t a = ids[k];
      if (a < part.lo || a >= part.hi) continue;
      const double f = scale * (part.values ? part.values[k] : 1.0);
      if (!wg.dense()) {  // prefetched in two stages, as in scores()
        if (k + 2 * kPrefetchItems < items_end) __builtin_prefetch(wg.offsets + ids[k + 2 * kPrefetchItems]);
        if (k + kPrefetchItems < items_end) {
          const std::size_t ahead = wg.offsets[ids[k + kPrefetchItems]];
          __builtin_prefetch(G + ahead);
          __builtin_prefetch(wg.slots + ahead);
        }
        for (std::size_t q = wg.offsets[a]; q < wg.offsets[a + 1]; ++q) G[q] += f * d[wg.slots[q]];
        continue;
      }
      double* g = G + std::size_t(a) * L;
      for (std::size_t yy = 0; yy < L; ++yy) g[yy] += f * d[yy];
    }
  }
}

/// The part's edge items of sentence s (edge deltas [T][L][L]; none at t = 0): g += scale · x · delta.
void reduce_edge_items(const Corpus& c, const WeightGroups& wg, const Dims& dims, const ReductionPart& part,
                       std::size_t s, const double* edge_delta, double scale, double* G) {
  const std::size_t LL = std::size_t(dims.L) * dims.L, tok0 = c.sentence_offsets[s], T = c.length(s);
  double* GE = G + dims.edge_offset();
  for (std::size_t t = 1; t < T; ++t) {
    const double* de = edge_delta + t * LL;
    for (std::size_t k = c.edge_offsets[tok0 + t]; k < c.edge_offsets[tok0 + t + 1]; ++k) {
      const std::uint32_t e = c.edge_ids[k];
      if (e < part.elo || e >= part.ehi) continue;
      const double f = scale * c.edge_value(k);
      if (!wg.dense()) {
        for_each_weight(wg, wg.edge(e), [&](std::size_t q, std::size_t j) { G[q] += f * de[j]; });
        continue;
      }
      double* g = GE + std::size_t(e) * LL;
      for (std::size_t j = 0; j < LL; ++j) g[j] += f * de[j];
    }
  }
}

}  // namespace

void CpuBackend::reduce_chunk(const CpuCorpus& cc, const Chunk& chunk, double scale, double* G) {
  const Corpus& c = cc.c;
  plan_reduction(cc, dims_, pool_.size());
  const WeightGroups wg = dims_.groups();
  const std::size_t L = dims_.L, LL = L * L;
  const unsigned parts = pool_.size();
  const bool avx512 = !row_masks_.empty();
  auto reduce_part = [&](std::size_t part, unsigned) {
    if (dims_.transitions) reduce_transitions(wg, L, pair_delta_.data(), chunk.n, part, parts, scale, G);
    const ReductionPart own(cc, part, dims_.A);
    SparseRows r;
    if (avx512) {
      r = rows(c);
      r.ids = own.ids;
      r.values = own.values;
      r.counts = own.own ? own.own->counts.data() : nullptr;
    }
    // Sentence by sentence its state items, then its edge items: the two write different
    // weights, so the order between them does not matter.
    for (std::size_t i = 0; i < chunk.n; ++i) {
      const std::size_t s = chunk.sentence(i);
      const double* node = node_delta_.data() + slots_[i] * L;
      if (avx512)
        row_reduce_avx512(r, c.sentence_offsets[s], c.length(s), own.first(c, s), own.end(c, s), node, scale,
                          own.lo, own.hi, G);
      else
        reduce_state_items(c, wg, L, own, s, node, scale, G);
      if (dims_.E) reduce_edge_items(c, wg, dims_, own, s, edge_delta_.data() + slots_[i] * LL, scale, G);
    }
  };
  // A few sentences (a stochastic trainer's step) are reduced on this thread: waking the pool
  // costs more than the work. The parts write disjoint ranges, so the result is the same.
  if (chunk.tokens < kSerialReduceTokens) {
    for (std::size_t part = 0; part < parts; ++part) reduce_part(part, 0);
  } else {
    pool_.run(parts, reduce_part);
  }
}

void CpuBackend::viterbi(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                         std::uint32_t* labels, double* best_scores) {
  const Corpus& c = cpu_corpus(bc).c;
  Prepared p;
  prepare(w, p);
  const std::vector<std::size_t> offset = span_offsets(c, span);
  pool_.run(span.count, [&](std::size_t i, unsigned worker) {
    Work& work = *work_[worker];
    ChainScores x = scores(c, p, span[i], work);
    const double best = crfx::viterbi(x, labels + offset[i], work.chain);
    if (best_scores) best_scores[i] = best;
  });
}

void CpuBackend::viterbi_nbest(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                               std::size_t n, std::uint32_t* labels, double* path_scores) {
  if (n == 0) throw Error("internal: n-best decoding needs n ≥ 1");
  if (n > 0xffffffffu / std::max<std::size_t>(1, dims_.L))  // predecessor indices yp·n + k
    throw Error("n-best decoding: n = " + std::to_string(n) + " is too large");
  const Corpus& c = cpu_corpus(bc).c;
  Prepared p;
  prepare(w, p);
  const std::vector<std::size_t> offset = span_offsets(c, span);
  std::size_t longest = 0;
  for (std::size_t i = 0; i < span.count; ++i) longest = std::max(longest, c.length(span[i]));
  // Each worker holds [T][L][n] scores and back-pointers for its sentence: refuse what would not
  // fit in memory rather than let the system kill the process half-way.
  const double table_gib = double(longest) * double(dims_.L) * double(n) * 12.0 / double(1 << 30);
  if (table_gib > kNbestMaxGiB)
    throw Error("n-best decoding: " + std::to_string(n) + " paths of a " + std::to_string(longest) +
                "-token sentence need " + std::to_string(int(table_gib + 0.5)) +
                " GiB of tables per thread (limit " + std::to_string(int(kNbestMaxGiB)) +
                " GiB); ask for fewer paths");
  pool_.run(span.count, [&](std::size_t i, unsigned worker) {
    Work& work = *work_[worker];
    ChainScores x = scores(c, p, span[i], work);
    crfx::viterbi_nbest(x, n, labels + n * offset[i], path_scores + i * n, work.chain);
  });
}

void CpuBackend::marginals(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                           double* node_marginals, double* log_z) {
  const Corpus& c = cpu_corpus(bc).c;
  Prepared p;
  prepare(w, p);
  const std::vector<std::size_t> offset = span_offsets(c, span);
  pool_.run(span.count, [&](std::size_t i, unsigned worker) {
    Work& work = *work_[worker];
    ChainScores x = scores(c, p, span[i], work);
    double lz;
    if (node_marginals) {
      ChainOutputs out;
      out.node = node_marginals + offset[i] * dims_.L;
      lz = forward_backward(x, out, work.chain, log_space_only_);
    } else {
      lz = log_partition(x, work.chain, log_space_only_);  // log Z alone: the forward pass
    }
    if (log_z) log_z[i] = lz;
  });
}

}  // namespace crfx
