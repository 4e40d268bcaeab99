// crfx — CPU backend: the sparse primitives of the stochastic trainers (sgd-l1, two-stage, adf,
// ap). See the section "sparse batch gradients" of include/crfx/internal/backend.hpp for the contracts.
//
// Sparse gradients reuse evaluate(): it adds scale·(E[f] − f(gold)) only to the rows of the
// attributes a span touches (plus transitions), so it runs on a dense scratch vector that is kept
// all-zero between calls; the result is gathered from the support and those entries re-zeroed.
// Cost O(batch tokens × L + support), never O(num_weights), and the values are bitwise those of
// the dense evaluate() (same code, same summation order, any thread count).
//
// Element-wise loops over a support run in cpu_sparse.hpp's blocks (entries are distinct: no
// races); sums combine the per-block partials in block order, whatever the number of threads.
#include <algorithm>
#include <cmath>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_sparse.hpp"
#include "crfx/errors.hpp"
#include "rules/elastic_net.hpp"

namespace crfx {

SparseVectorPtr CpuBackend::sparse_vector() { return std::make_unique<CpuSparse>(); }

void CpuBackend::support(const BackendCorpus& bc, SentenceSpan span, SparseVector& xs) {
  const Corpus& c = corpus_of(bc);
  CpuSparse& x = cpu_sparse(xs);
  // Every id is checked before the plan: a refused span changes nothing.
  for (std::size_t i = 0; i < span.count; ++i)
    if (span[i] >= c.num_sentences()) throw Error("internal: sentence id beyond the corpus");
  sgd_groups_.support(c, span, dims_.groups(), dims_.transitions && span.count > 0, x.index);
  x.value.assign(x.index.size(), 0.0);
}

namespace {
/// Moves the support entries of the all-zero-elsewhere scratch G into x.value and re-zeroes them.
void take(ThreadPool& pool, HostArray& G, CpuSparse& x) {
  blocks(pool, x.index.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) {
      double& g = G[x.index[j]];
      x.value[j] = g;
      g = 0.0;
    }
  });
}
}  // namespace

double CpuBackend::evaluate_sparse(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                                   SparseVector& grad, double scale, bool support_given,
                                   SequenceLoss loss_kind) {
  CpuSparse& x = cpu_sparse(grad);
  if (!support_given) support(bc, span, x);
  check_index(x, dims_.num_weights());
  if (!sgd_dense_ || sgd_dense_->size() != dims_.num_weights()) sgd_dense_ = vector(dims_.num_weights());
  HostArray& G = data(*sgd_dense_);
  double loss = 0;
  try {
    loss = evaluate(bc, w, span, sgd_dense_.get(), scale, loss_kind);
  } catch (...) {
    take(pool_, G, x);  // keep the scratch all-zero
    throw;
  }
  take(pool_, G, x);
  return loss;
}

std::size_t CpuBackend::feature_difference(const BackendCorpus& bc, SentenceSpan span,
                                           const std::uint32_t* labels, SparseVector& out,
                                           double scale) {
  const Corpus& c = corpus_of(bc);
  CpuSparse& x = cpu_sparse(out);
  support(bc, span, x);
  if (!sgd_dense_ || sgd_dense_->size() != dims_.num_weights()) sgd_dense_ = vector(dims_.num_weights());
  HostArray& G = data(*sgd_dense_);
  std::size_t wrong = 0;
  try {
    wrong = add_feature_difference(c, dims_, span, labels, scale, G.data());
  } catch (...) {
    take(pool_, G, x);
    throw;
  }
  take(pool_, G, x);
  return wrong;
}

void CpuBackend::sparse_copy(const SparseVector& src, SparseVector& dst) {
  const CpuSparse& s = cpu_sparse(src);
  CpuSparse& d = cpu_sparse(dst);
  d.index = s.index;
  d.value = s.value;
}

void CpuBackend::gather(const Vector& w, SparseVector& xs) {
  CpuSparse& x = cpu_sparse(xs);
  const HostArray& W = data(w);
  check_index(x, W.size());
  blocks(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) x.value[j] = W[x.index[j]];
  });
}

void CpuBackend::scatter(const SparseVector& xs, Vector& w) {
  const CpuSparse& x = cpu_sparse(xs);
  HostArray& W = data(w);
  check_index(x, W.size());
  blocks(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) W[x.index[j]] = x.value[j];
  });
}

void CpuBackend::sparse_axpy(double a, const SparseVector& xs, Vector& y) {
  const CpuSparse& x = cpu_sparse(xs);
  HostArray& Y = data(y);
  check_index(x, Y.size());
  blocks(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) Y[x.index[j]] += a * x.value[j];
  });
}

double CpuBackend::sparse_penalty(const SparseVector& xs, double c1, double c2) {
  const CpuSparse& x = cpu_sparse(xs);
  return reduce(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    double s = 0;
    for (std::size_t j = b; j < e; ++j) s += penalty_term(x.value[j], c1, c2);
    return s;
  });
}

}  // namespace crfx
