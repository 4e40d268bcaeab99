// crfx — the Backend seam.
//
// Everything heavy goes through this interface. Optimizers hold backend vectors and call these
// primitives; they never see the hardware (no CUDA header is included above this line), so each
// optimizer is written once, tested on the CPU, and runs on any backend unchanged.
//
//   Corpus ──upload──▶ BackendCorpus (resident, static)
//   Vector w ──evaluate(corpus, w, sentences)──▶ Σ NLL, grad += scale·(E[f] − f(gold))
//            ──viterbi / marginals──▶ labels / probabilities on the host
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crfx/corpus.hpp"

namespace crfx {

/// A vector of doubles resident on a backend. Created by Backend::vector(); move-only owner.
class Vector {
 public:
  virtual ~Vector() = default;
  virtual std::size_t size() const = 0;
};
using VectorPtr = std::unique_ptr<Vector>;

/// A corpus uploaded to a backend. Opaque; created by Backend::upload().
class BackendCorpus {
 public:
  virtual ~BackendCorpus() = default;
  virtual std::size_t num_sentences() const = 0;
  virtual std::size_t num_tokens() const = 0;
};
using BackendCorpusPtr = std::unique_ptr<BackendCorpus>;

/// A subset of sentence ids, in order (a slice of a permutation). `ids == nullptr` means the
/// sentences 0 … count-1.
struct SentenceSpan {
  const std::uint32_t* ids = nullptr;
  std::size_t count = 0;
  std::uint32_t operator[](std::size_t i) const { return ids ? ids[i] : std::uint32_t(i); }
};
inline SentenceSpan all_sentences(const BackendCorpus& c) { return {nullptr, c.num_sentences()}; }

class Backend {
 public:
  virtual ~Backend() = default;
  /// "cpu (2 threads)", "cuda:0 NVIDIA H100 …".
  virtual std::string name() const = 0;
  const Dims& dims() const { return dims_; }

  // ---- data ------------------------------------------------------------------------------
  virtual BackendCorpusPtr upload(const Corpus& corpus) = 0;

  // ---- vectors (backend-resident) ----------------------------------------------------------
  virtual VectorPtr vector(std::size_t n) = 0;  // zero-filled
  virtual void write(Vector& dst, const double* src) = 0;
  virtual void read(const Vector& src, double* dst) = 0;
  virtual void fill(Vector& x, double value) = 0;
  virtual void copy(const Vector& src, Vector& dst) = 0;
  virtual void scale(double a, Vector& x) = 0;                        // x = a·x
  virtual void axpy(double a, const Vector& x, Vector& y) = 0;        // y += a·x
  virtual void axpby(double a, const Vector& x, double b, Vector& y) = 0;  // y = a·x + b·y
  virtual void sub(const Vector& x, const Vector& y, Vector& out) = 0;     // out = x − y
  virtual double dot(const Vector& x, const Vector& y) = 0;
  virtual double norm1(const Vector& x) = 0;
  virtual double norm2sq(const Vector& x) = 0;
  virtual double norm_inf(const Vector& x) = 0;
  virtual std::size_t count_nonzero(const Vector& x) = 0;

  // ---- OWL-QN (Andrew & Gao 2007) ----------------------------------------------------------
  /// Pseudo-gradient of h + c1‖w‖₁ at w (g = ∇h), written to `pg`.
  virtual void owlqn_pseudo_gradient(const Vector& w, const Vector& g, double c1, Vector& pg) = 0;
  /// d_i = 0 where d_i · pg_i ≥ 0 (keep only components that descend along −pg).
  virtual void owlqn_constrain_direction(const Vector& pg, Vector& d) = 0;
  /// w_i = 0 where w_i has left the orthant ξ_i = sign(w0_i) (or −sign(pg_i) when w0_i = 0).
  virtual void owlqn_project(const Vector& w0, const Vector& pg, Vector& w) = 0;

  // ---- batch primitives --------------------------------------------------------------------
  /// Negative log-likelihood Σ_i −log p(y_i | x_i) over `sentences` (all labeled). When `grad`
  /// is given, adds scale · (E_p[f] − f(x, y)) to it (the NLL gradient). grad == nullptr is the
  /// loss-only mode (forward pass only), for line searches.
  virtual double evaluate(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                          Vector* grad, double scale) = 0;
  /// Best label sequence per sentence, written in span order (token after token) to `labels`.
  /// Ties go to the smallest label id.
  virtual void viterbi(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                       std::uint32_t* labels) = 0;
  /// Node marginals p(y_t = y | x), [tokens of the span][L], and log Z per sentence.
  virtual void marginals(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                         double* node_marginals, double* log_z) = 0;

 protected:
  explicit Backend(const Dims& dims) : dims_(dims) {}
  Dims dims_;
};
using BackendPtr = std::unique_ptr<Backend>;

enum class DeviceKind { auto_select, cpu, cuda };

struct BackendOptions {
  DeviceKind device = DeviceKind::auto_select;
  unsigned threads = 0;  // CPU worker threads; 0 = all cores
  /// Force the log-space forward-backward on every sentence (reference path for tests);
  /// by default the scaled exp-space path runs and falls back to log space on underflow.
  bool log_space_only = false;
};

/// Parses "auto" | "cpu" | "cuda".
DeviceKind parse_device(const std::string& s);
/// Creates the backend asked for. `cuda` without a usable GPU throws Error saying why; `auto`
/// falls back to the CPU and, via `note`, says so. `note` also receives the chosen device name.
BackendPtr make_backend(const Dims& dims, const BackendOptions& options, std::string* note);

/// Convenience: host → new backend vector.
VectorPtr to_backend(Backend& b, const std::vector<double>& host);
/// Convenience: backend vector → host.
std::vector<double> to_host(Backend& b, const Vector& v);

}  // namespace crfx
