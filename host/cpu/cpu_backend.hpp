// crfx — the CPU backend: multi-threaded over sentences, double precision throughout. It is also
// the reference every other backend is tested against.
#pragma once

#include <memory>
#include <vector>

#include "cpu/chain.hpp"
#include "cpu/thread_pool.hpp"
#include "crfx/backend.hpp"

namespace crfx {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Dims& dims, unsigned threads, bool log_space_only = false);
  ~CpuBackend() override;

  std::string name() const override;
  unsigned threads() const { return pool_.size(); }

  BackendCorpusPtr upload(const Corpus& corpus) override;

  VectorPtr vector(std::size_t n) override;
  void write(Vector& dst, const double* src) override;
  void read(const Vector& src, double* dst) override;
  void fill(Vector& x, double value) override;
  void copy(const Vector& src, Vector& dst) override;
  void scale(double a, Vector& x) override;
  void axpy(double a, const Vector& x, Vector& y) override;
  void axpby(double a, const Vector& x, double b, Vector& y) override;
  void sub(const Vector& x, const Vector& y, Vector& out) override;
  double dot(const Vector& x, const Vector& y) override;
  double norm1(const Vector& x) override;
  double norm2sq(const Vector& x) override;
  double norm_inf(const Vector& x) override;
  std::size_t count_nonzero(const Vector& x) override;

  void owlqn_pseudo_gradient(const Vector& w, const Vector& g, double c1, Vector& pg) override;
  void owlqn_constrain_direction(const Vector& pg, Vector& d) override;
  void owlqn_project(const Vector& w0, const Vector& pg, Vector& w) override;

  double evaluate(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                  Vector* grad, double scale) override;
  void viterbi(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
               std::uint32_t* labels) override;
  void marginals(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                 double* node_marginals, double* log_z) override;

  /// Largest number of tokens whose per-token buffers evaluate() holds at once (tests lower it
  /// to exercise chunking; the result does not depend on it).
  void set_chunk_tokens(std::size_t tokens) { chunk_tokens_ = tokens; }

 private:
  struct Work;
  struct Prepared;
  /// Element-wise loop over [0, n) in blocks of kReduceBlock.
  template <class F>
  void for_blocks(std::size_t n, F&& f);
  /// Σ over blocks of f(begin, end), combined in block order (thread-count independent).
  template <class F>
  double reduce_blocks(std::size_t n, F&& f);
  void prepare(const Vector& w, Prepared& p);
  /// State scores and per-position transition matrices of sentence s into `work`.
  ChainScores scores(const Corpus& c, const Prepared& p, std::size_t s, Work& work) const;

  ThreadPool pool_;
  bool log_space_only_;
  std::size_t chunk_tokens_;
  std::vector<std::unique_ptr<Work>> work_;  // [threads] per-worker scratch
  // evaluate() buffers, grow-only (no allocation once training runs):
  std::vector<double> node_delta_;   // [chunk tokens][L]   p − 1(gold)
  std::vector<double> pair_delta_;   // [chunk sentences][L][L]
  std::vector<double> edge_delta_;   // [chunk tokens][L][L] (only when E > 0)
  std::vector<double> losses_;       // [chunk sentences]
  std::vector<std::size_t> slots_;   // [chunk sentences + 1] token offsets within the chunk
  std::vector<double> exp_trans_;    // [2][L][L]: E = exp(τ − max τ) and Eᵀ
};

}  // namespace crfx
