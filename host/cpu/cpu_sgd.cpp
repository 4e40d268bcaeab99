// crfx — CPU backend: the sparse primitives of the stochastic trainers (sgd-l1, two-stage, adf,
// ap). See the section "stochastic trainers" of include/crfx/backend.hpp for the contracts.
//
// Sparse gradients reuse evaluate(): it adds scale·(E[f] − f(gold)) only to the rows of the
// attributes a span touches (plus transitions), so it runs on a dense scratch vector that is kept
// all-zero between calls; the result is gathered from the support and those entries re-zeroed.
// Cost O(batch tokens × L + support), never O(num_weights), and the values are bitwise those of
// the dense evaluate() (same code, same summation order, any thread count).
//
// Element-wise loops over a support run sequentially up to kReduceBlock entries and in
// kReduceBlock blocks on the pool above that (entries are distinct: no races); sums combine the
// per-block partials in block order, so nothing depends on the number of threads.
#include <algorithm>
#include <cmath>

#include "cpu/cpu_backend.hpp"
#include "crfx/error.hpp"
#include "crfx/update_rules.hpp"

namespace crfx {
namespace {

struct CpuSparse final : SparseVector {
  std::vector<std::size_t> index;  // strictly increasing
  std::vector<double> value;
  std::size_t nnz() const override { return index.size(); }
};

CpuSparse& S(SparseVector& x) {
  auto* p = dynamic_cast<CpuSparse*>(&x);
  if (!p) throw Error("internal: sparse vector does not belong to the CPU backend");
  return *p;
}
const CpuSparse& S(const SparseVector& x) { return S(const_cast<SparseVector&>(x)); }

void check_index(const CpuSparse& x, std::size_t n) {
  if (!x.index.empty() && x.index.back() >= n)
    throw Error("internal: sparse index beyond the vector (" + std::to_string(x.index.back()) +
                " ≥ " + std::to_string(n) + ")");
}

/// f(begin, end) over [0, n): one call when n ≤ kReduceBlock, else blocks on the pool.
template <class F>
void blocks(ThreadPool& pool, std::size_t n, F&& f) {
  if (n <= kReduceBlock) {
    if (n) f(std::size_t(0), n);
    return;
  }
  const std::size_t nb = (n + kReduceBlock - 1) / kReduceBlock;
  pool.run(nb, [&](std::size_t b, unsigned) { f(b * kReduceBlock, std::min(n, (b + 1) * kReduceBlock)); });
}

/// Σ of f(begin, end) over kReduceBlock blocks of [0, n), combined in block order.
template <class F>
double reduce(ThreadPool& pool, std::size_t n, F&& f) {
  const std::size_t nb = (n + kReduceBlock - 1) / kReduceBlock;
  if (nb <= 1) return n ? f(std::size_t(0), n) : 0.0;
  std::vector<double> partial(nb, 0.0);
  pool.run(nb, [&](std::size_t b, unsigned) {
    partial[b] = f(b * kReduceBlock, std::min(n, (b + 1) * kReduceBlock));
  });
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

}  // namespace

SparseVectorPtr CpuBackend::sparse_vector() { return std::make_unique<CpuSparse>(); }

void CpuBackend::support(const BackendCorpus& bc, SentenceSpan span, SparseVector& xs) {
  const Corpus& c = corpus_of(bc);
  CpuSparse& x = S(xs);
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
                                   SparseVector& grad, double scale, bool support_given) {
  CpuSparse& x = S(grad);
  if (!support_given) support(bc, span, x);
  check_index(x, dims_.num_weights());
  if (!sgd_dense_ || sgd_dense_->size() != dims_.num_weights()) sgd_dense_ = vector(dims_.num_weights());
  HostArray& G = data(*sgd_dense_);
  double loss = 0;
  try {
    loss = evaluate(bc, w, span, sgd_dense_.get(), scale);
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
  CpuSparse& x = S(out);
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
  const CpuSparse& s = S(src);
  CpuSparse& d = S(dst);
  d.index = s.index;
  d.value = s.value;
}

void CpuBackend::gather(const Vector& w, SparseVector& xs) {
  CpuSparse& x = S(xs);
  const HostArray& W = data(w);
  check_index(x, W.size());
  blocks(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) x.value[j] = W[x.index[j]];
  });
}

void CpuBackend::scatter(const SparseVector& xs, Vector& w) {
  const CpuSparse& x = S(xs);
  HostArray& W = data(w);
  check_index(x, W.size());
  blocks(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) W[x.index[j]] = x.value[j];
  });
}

void CpuBackend::sparse_axpy(double a, const SparseVector& xs, Vector& y) {
  const CpuSparse& x = S(xs);
  HostArray& Y = data(y);
  check_index(x, Y.size());
  blocks(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) Y[x.index[j]] += a * x.value[j];
  });
}

double CpuBackend::sparse_penalty(const SparseVector& xs, double c1, double c2) {
  const CpuSparse& x = S(xs);
  return reduce(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    double s = 0;
    for (std::size_t j = b; j < e; ++j) s += penalty_term(x.value[j], c1, c2);
    return s;
  });
}

void CpuBackend::lazy_decay(Vector& w, Vector& stamp, double clock, const Vector* rate, double coef,
                            const SparseVector* sup) {
  HostArray& W = data(w);
  HostArray& T = data(stamp);
  const double* R = rate ? data(*rate).data() : nullptr;
  if (T.size() != W.size() || (rate && rate->size() != W.size()))
    throw Error("internal: lazy_decay vector sizes differ");
  // The L weights of a row share their rate and stamp (supports are whole rows), so a one-entry
  // memo of the last factor saves almost every pow/exp; it returns the very same value.
  struct Memo {
    double r = std::nan(""), d = std::nan(""), f = 1.0;
  };
  auto one = [&](std::size_t i, Memo& m) {
    if (T[i] == clock) return;
    const double d = clock - T[i], r = R ? R[i] : 0.0;
    if (!(d == m.d && r == m.r)) {
      m.f = lazy_decay_factor(d, R ? &r : nullptr, coef);
      m.d = d;
      m.r = r;
    }
    W[i] *= m.f;
    T[i] = clock;
  };
  if (!sup) {
    blocks(pool_, W.size(), [&](std::size_t b, std::size_t e) {
      Memo m;
      for (std::size_t i = b; i < e; ++i) one(i, m);
    });
    return;
  }
  const CpuSparse& x = S(*sup);
  check_index(x, W.size());
  blocks(pool_, x.index.size(), [&](std::size_t b, std::size_t e) {
    Memo m;
    for (std::size_t j = b; j < e; ++j) one(x.index[j], m);
  });
}

double CpuBackend::sgd_l1_step(Vector& w, Vector* q, const SparseVector& gs, double eta, double u, double c1,
                               double c2, bool keep_q) {
  const CpuSparse& g = S(gs);
  HostArray& W = data(w);
  double* Q = q ? data(*q).data() : nullptr;
  if (q && q->size() != W.size()) throw Error("internal: sgd_l1_step vector sizes differ");
  check_index(g, W.size());
  const bool penalty = c1 != 0 || c2 != 0;  // else 0, not 0·|w| (NaN for an infinite weight)
  // In sparse_penalty's blocks and order, so the penalty is the one it would give.
  return reduce(pool_, g.index.size(), [&](std::size_t b, std::size_t e) {
    double s = 0;
    for (std::size_t j = b; j < e; ++j) {
      const std::size_t i = g.index[j];
      const double wi = sgd_l1_update(W[i], g.value[j], eta, u, Q ? Q + i : nullptr, keep_q);
      W[i] = wi;
      if (penalty) s += penalty_term(wi, c1, c2);
    }
    return s;
  });
}

void CpuBackend::adf_step(Vector& w, const Vector& rate, Vector& count, const SparseVector& gs) {
  const CpuSparse& g = S(gs);
  HostArray& W = data(w);
  const HostArray& R = data(rate);
  HostArray& N = data(count);
  if (R.size() != W.size() || N.size() != W.size()) throw Error("internal: adf_step vector sizes differ");
  check_index(g, W.size());
  blocks(pool_, g.index.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) {
      const std::size_t i = g.index[j];
      W[i] -= R[i] * g.value[j];
      N[i] += 1.0;
    }
  });
}

void CpuBackend::adf_update_rates(Vector& rate, Vector& count, double window, double alpha,
                                  double beta) {
  HostArray& R = data(rate);
  HostArray& N = data(count);
  if (R.size() != N.size()) throw Error("internal: adf_update_rates vector sizes differ");
  blocks(pool_, R.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      R[i] = adf_rate_update(R[i], N[i], window, alpha, beta);
      N[i] = 0.0;
    }
  });
}

}  // namespace crfx
