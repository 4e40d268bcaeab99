// crfx — the CPU backend: multi-threaded over sentences, double precision throughout. It is also
// the reference every other backend is tested against.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "cpu/chain.hpp"
#include "cpu/chain_loss.hpp"
#include "cpu/sparse_rows.hpp"
#include "util/thread_pool.hpp"
#include "crfx/internal/backend.hpp"

namespace crfx {

namespace cpu_detail {
struct CpuCorpus;  // the CPU-resident corpus behind a BackendCorpus (cpu_backend.cpp)
}  // namespace cpu_detail

/// The storage of a CPU backend Vector: a fixed-size array of doubles, zero at creation. From
/// 4 MiB up it is an anonymous mapping, 2 MiB-aligned and marked for transparent huge pages
/// (madvise): the kernel zero-fills its pages on first touch, so a new vector costs nothing until
/// it is written (L-BFGS's history vectors of a short run are never touched), and first touching a
/// 60 MB weight vector takes a few dozen page faults instead of ~15,000. Smaller arrays: calloc.
class HostArray {
 public:
  explicit HostArray(std::size_t n);  // throws std::bad_alloc
  ~HostArray();
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;
  void swap(HostArray& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(mapped_, o.mapped_);
  }

  std::size_t size() const { return n_; }
  double* data() { return p_; }
  const double* data() const { return p_; }
  double& operator[](std::size_t i) { return p_[i]; }
  const double& operator[](std::size_t i) const { return p_[i]; }
  double* begin() { return p_; }
  double* end() { return p_ + n_; }
  const double* begin() const { return p_; }
  const double* end() const { return p_ + n_; }

 private:
  double* p_ = nullptr;
  std::size_t n_ = 0;
  std::size_t mapped_ = 0;  // bytes of the mapping, 0 when from calloc
};

class CpuBackend final : public Backend, public IncrementalGradients, public SparseGradients, public BlockStatistics {
 public:
  CpuBackend(const Dims& dims, unsigned threads, bool log_space_only = false);
  ~CpuBackend() override;

  std::string name() const override;
  unsigned host_threads() const override { return threads(); }

  IncrementalGradients* incremental() override { return this; }

  SparseGradients* sparse() override { return this; }
  BlockStatistics* blockwise() override { return this; }
  unsigned threads() const { return pool_.size(); }

  BackendCorpusPtr upload(const Corpus& corpus) override;
  BackendCorpusPtr upload(Corpus&& corpus) override;
  const Corpus* host_corpus(const BackendCorpus& corpus) const override { return &corpus_of(corpus); }

  // vectors: host/cpu/cpu_vectors.cpp (their algebra: Backend's rules, run by apply_rule)
  VectorPtr vector(std::size_t n) override;
  void write(Vector& dst, const double* src) override;
  void read(const Vector& src, double* dst) override;
  void swap(Vector& x, Vector& y) override;

  // element rules: host/cpu/cpu_rules.cpp
  double apply_rule(const MapRule& rule, const MapOperands& operands, const SparseVector* over,
                    bool sum) override;

  // SAG / SAGA (seed 004): host/cpu/cpu_sag.cpp.
  IncrementalStatePtr incremental_create(const BackendCorpus& corpus) override;
  void incremental_sync(IncrementalState& state, SentenceSpan sentences, Vector& w, const Vector& d) override;
  double incremental_evaluate(IncrementalState& state, const Vector& w, double* grad_norm2) override;
  LipschitzFound incremental_search(IncrementalState& state, Vector& w, double L0) override;
  void incremental_trial(IncrementalState& state, Vector& w, double step) override;
  void incremental_restore(IncrementalState& state, Vector& w) override;
  void incremental_commit(IncrementalState& state, Vector& d, Vector& w, const double* w_coef) override;
  void incremental_step(IncrementalState& state, double a, double b, double tau, Vector& w,
                const Vector& d) override;
  void incremental_flush(IncrementalState& state, Vector& w, const Vector& d) override;
  std::vector<double> incremental_save(IncrementalState& state) override;
  void incremental_load(IncrementalState& state, const std::vector<double>& marginals) override;
  void incremental_schedule(IncrementalState& state, SentenceSpan span, const SagStepParams& p, Vector& w,
                            Vector& d) override;
  void incremental_schedule_drawn(IncrementalState& state, const SagSamplerRef& sampler, const SagStepParams& p,
                                  Vector& w, Vector& d) override;

  double evaluate(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                  Vector* grad, double scale, SequenceLoss loss = SequenceLoss::seq_log) override;
  void viterbi(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
               std::uint32_t* labels, double* best_scores) override;
  void viterbi_nbest(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                     std::size_t n, std::uint32_t* labels, double* path_scores) override;
  void marginals(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                 double* node_marginals, double* log_z) override;

  // stochastic trainers: sparse batch gradients (host/cpu/cpu_sgd.cpp)
  SparseVectorPtr sparse_vector() override;
  void support(const BackendCorpus& corpus, SentenceSpan sentences, SparseVector& x) override;
  double evaluate_sparse(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                         SparseVector& grad, double scale, bool support_given,
                         SequenceLoss loss = SequenceLoss::seq_log) override;
  std::size_t feature_difference(const BackendCorpus& corpus, SentenceSpan sentences,
                                 const std::uint32_t* labels, SparseVector& out,
                                 double scale) override;
  void sparse_copy(const SparseVector& src, SparseVector& dst) override;
  void gather(const Vector& w, SparseVector& x) override;
  void scatter(const SparseVector& x, Vector& w) override;
  void sparse_axpy(double a, const SparseVector& x, Vector& y) override;
  double sparse_penalty(const SparseVector& x, double c1, double c2) override;

  // blockwise coordinate descent (bcd): host/cpu/cpu_bcd.cpp
  void block_index(const BackendCorpus& corpus, std::vector<std::size_t>& offsets,
                   std::vector<std::uint32_t>& sentences) override;
  void block_statistics(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                        std::uint32_t group, double* grad, double* curv) override;
  void read_block(const Vector& w, std::uint32_t group, double* out) override;
  void write_block(Vector& w, std::uint32_t group, const double* in) override;

  /// Largest number of tokens whose per-token buffers evaluate() holds at once (tests lower it
  /// to exercise chunking; the result does not depend on it).
  void set_chunk_tokens(std::size_t tokens) { chunk_tokens_ = tokens; }
  std::size_t upload_bytes(const Corpus& corpus) const override;
  std::size_t workspace_bytes(const Corpus& corpus, SequenceLoss loss = SequenceLoss::seq_log) const override;

 private:
  // Per-worker scratch and per-weight-vector precomputation; defined here (not in
  // cpu_backend.cpp) so that the backend's other translation units (cpu_sag.cpp) can use them.
  struct Work {
    ChainScratch chain;
    std::vector<double> state;            // [T][L]
    std::vector<double> edge;             // [T][L][L] per-position transition matrices
    std::vector<const double*> edge_ptr;  // [T]
    std::vector<std::uint32_t> gold;      // [T]
    LossScratch loss;                     // sequence_loss's, for the losses other than seq-log
    std::vector<double> node, pair;       // block_statistics: [T][L] node, [T][L][L] pair marginals
  };
  struct Prepared {
    const double* W = nullptr;      // weights
    const double* trans = nullptr;  // [L][L] (zeros when transitions are off)
    std::vector<double> dense_trans;  // the [L][L] matrix when the weights do not hold it as one
    double trans_max = 0;
  };
  /// The CPU-resident data behind the opaque handles (throw Error for a foreign object).
  static HostArray& data(Vector& v);
  static const HostArray& data(const Vector& v);
  static const Corpus& corpus_of(const BackendCorpus& c);
  void prepare(const Vector& w, Prepared& p);
  /// State scores and per-position transition matrices of sentence s into `work`.
  ChainScores scores(const Corpus& c, const Prepared& p, std::size_t s, Work& work) const;
  /// Sentence s's labels into work.gold; throws for a token without one.
  static const std::uint32_t* gold_labels(const Corpus& c, std::size_t s, Work& work);

  // evaluate()'s steps (the phases of cpu_backend.cpp's top comment), a chunk of the span at a time.
  /// Sentences span[begin, begin + n): n sentences of `tokens` tokens, at slots_ within the chunk.
  struct Chunk {
    SentenceSpan span;
    std::size_t begin = 0, n = 0, tokens = 0;
    std::uint32_t sentence(std::size_t i) const { return span[begin + i]; }
  };
  /// The chunk from span[begin], its offsets into slots_ and room for its deltas (with a gradient).
  Chunk plan_chunk(const Corpus& c, SentenceSpan span, std::size_t begin, bool per_position, bool gradient);
  /// Phase 1, in parallel over the chunk's sentences: each one's loss into losses_ (and deltas).
  void chunk_sentences(const Corpus& c, const Prepared& p, const Chunk& chunk, SequenceLoss loss,
                       bool gradient);
  /// Phase 1 for sentence s, the chunk's i-th: its loss, and with a gradient its deltas
  /// p − 1(gold) into the chunk's node, pair and edge buffers.
  double sentence_deltas(const Corpus& c, const Prepared& p, std::size_t s, std::size_t i, SequenceLoss loss,
                         bool gradient, Work& work);
  /// Phase 2: g += scale · Xᵀ·delta over the chunk, each worker on its attribute range.
  void reduce_chunk(const cpu_detail::CpuCorpus& cc, const Chunk& chunk, double scale, double* G);

  ThreadPool pool_;
  bool log_space_only_;
  std::size_t chunk_tokens_;
  std::size_t chunk_doubles_;  // evaluate's chunk buffers, at most (chunk_bytes in cpu_backend.cpp)
  std::vector<std::unique_ptr<Work>> work_;  // [threads] per-worker scratch
  // evaluate() buffers, grow-only (no allocation once training runs):
  std::vector<double> node_delta_;   // [chunk tokens][L]   p − 1(gold)
  std::vector<double> pair_delta_;   // [chunk sentences][L][L]
  std::vector<double> edge_delta_;   // [chunk tokens][L][L] (only when E > 0 or a pointwise loss)
  std::vector<double> losses_;       // [chunk sentences]
  std::vector<std::size_t> slots_;   // [chunk sentences + 1] token offsets within the chunk
  // The observed-pair layout's state rows as sparse_rows.hpp's AVX-512 code takes them (empty
  // where it does not run: a dense layout, more than kRowMaxLabels labels, no AVX-512).
  std::vector<std::uint64_t> row_masks_;  // [A]
  SparseRows rows(const Corpus& c) const;
  std::vector<double> exp_trans_;    // [2][L][L]: E = exp(τ − max τ) and Eᵀ, then both padded (chain.hpp)
  // cpu_sgd.cpp scratch, grow-only: a dense gradient kept all-zero between calls (sparse results
  // are gathered from it and its support re-zeroed: O(support)), and attribute marks (all 0).
  VectorPtr sgd_dense_;
  SpanGroups sgd_groups_;                    // support(): the span's weight groups
  std::vector<double> block_partial_;        // block_statistics: [parts][2·group size], grow-only
};

}  // namespace crfx
