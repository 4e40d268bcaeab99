// crfx — CudaBackend (cuda_backend.cuh): the stochastic trainers' primitives — sparse vectors on
// the device, supports and perceptron feature differences (built on the host and uploaded),
// evaluate_sparse (through the span plans of backend_sag.cu), and the sparse element-wise steps
// (gather, scatter, axpy, lazy decay, SGD-L1, ADF) as maps and reductions (vector_ops.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {

// ---- stochastic trainers: sparse batch gradients ----------------------------------------

SparseVectorPtr CudaBackend::sparse_vector() { return std::make_unique<CudaSparse>(this); }

void CudaBackend::support(const BackendCorpus& bc, SentenceSpan span, SparseVector& xs) {
  support_host(C(bc).host, span);
  upload_sparse(X(xs), false);
}

double CudaBackend::evaluate_sparse(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                                    SparseVector& grad, double scale, bool support_given) {
  // Span-local: the plan's groups are S(span) in index order, so the span gradient lands
  // directly in the sparse vector's values (O(span items), not a scan of the corpus).
  const CudaCorpus& c = C(bc);
  CudaSparse& x = X(grad);
  if (w.size() != dims_.num_weights()) throw Error("internal: weight vector size mismatch");
  plan_span(c, span, nullptr, false, sp_plan_);
  const double loss = span_marginals(c, w, sp_plan_, sp_node_, sp_pair_, sp_edge_);
  if (support_given) {
    // grad's indices on the device are S(span) from support(); its length must be the plan's.
    if (x.n != sp_plan_.compact())
      throw Error("internal: evaluate_sparse given a support of " + std::to_string(x.n) +
                  " entries for a span whose support has " + std::to_string(sp_plan_.compact()));
    if (x.n) CRFX_CUDA_CHECK(cudaMemsetAsync(x.value.get(), 0, x.n * sizeof(double), stream_));
  } else {
    const WeightGroups wg = dims_.groups();
    h_index_.resize(sp_plan_.compact());
    std::size_t j = 0;
    for (std::uint32_t gid : sp_plan_.groups) {
      const std::size_t b = wg.begin(gid), size = wg.size(gid);
      for (std::size_t k = 0; k < size; ++k) h_index_[j++] = b + k;
    }
    upload_sparse(x, false);
  }
  span_gradient(c, sp_plan_, sp_node_, sp_pair_, sp_edge_, scale, x.value.get());
  return loss;
}

std::size_t CudaBackend::feature_difference(const BackendCorpus& bc, SentenceSpan span,
                                            const std::uint32_t* labels, SparseVector& out, double scale) {
  // On the host, as CpuBackend (O(batch tokens × items + support)), then uploaded.
  const Corpus& c = C(bc).host;
  support_host(c, span);
  const std::size_t L = dims_.L, LL = L * L;
  h_dense_.resize(dims_.num_weights(), 0.0);  // kept all-zero between calls
  double* Gh = h_dense_.data();
  double* GT = Gh + dims_.transition_offset();
  double* GE = Gh + dims_.edge_offset();
  std::size_t wrong = 0, pos = 0;
  auto take = [&] {
    h_value_.resize(h_index_.size());
    for (std::size_t j = 0; j < h_index_.size(); ++j) {
      h_value_[j] = Gh[h_index_[j]];
      Gh[h_index_[j]] = 0.0;
    }
  };
  try {
    for (std::size_t i = 0; i < span.count; ++i) {
      const std::size_t s = span[i];
      const std::size_t tok0 = c.sentence_offsets[s], T = c.length(s);
      for (std::size_t t = 0; t < T; ++t, ++pos) {
        const std::uint32_t y = c.labels[tok0 + t], p = labels[pos];
        if (y == Corpus::kNoLabel) throw Error("sentence " + std::to_string(s) + " has tokens without a label");
        if (p >= L) throw Error("internal: predicted label beyond the model");
        if (y != p) {
          ++wrong;
          for (std::size_t k = c.state_offsets[tok0 + t]; k < c.state_offsets[tok0 + t + 1]; ++k) {
            const double v = scale * c.state_value(k);
            double* row = Gh + std::size_t(c.state_ids[k]) * L;
            row[y] += v;
            row[p] -= v;
          }
        }
        if (t == 0) continue;
        const std::uint32_t y0 = c.labels[tok0 + t - 1], p0 = labels[pos - 1];
        if (y0 == p0 && y == p) continue;
        const std::size_t gold = std::size_t(y0) * L + y, pred = std::size_t(p0) * L + p;
        if (dims_.transitions) {
          GT[gold] += scale;
          GT[pred] -= scale;
        }
        if (c.edge_offsets.size() == c.num_tokens() + 1)
          for (std::size_t k = c.edge_offsets[tok0 + t]; k < c.edge_offsets[tok0 + t + 1]; ++k) {
            const double v = scale * c.edge_value(k);
            double* blk = GE + std::size_t(c.edge_ids[k]) * LL;
            blk[gold] += v;
            blk[pred] -= v;
          }
      }
    }
  } catch (...) {
    take();
    throw;
  }
  take();
  upload_sparse(X(out), true);
  return wrong;
}

void CudaBackend::sparse_copy(const SparseVector& src, SparseVector& dst) {
  const CudaSparse& s = X(src);
  CudaSparse& d = X(dst);
  if (&s == &d) return;
  d.reserve(s.n);
  if (s.n) {
    CRFX_CUDA_CHECK(cudaMemcpyAsync(d.index.get(), s.index.get(), s.n * sizeof(std::size_t),
                                    cudaMemcpyDeviceToDevice, stream_));
    CRFX_CUDA_CHECK(cudaMemcpyAsync(d.value.get(), s.value.get(), s.n * sizeof(double),
                                    cudaMemcpyDeviceToDevice, stream_));
  }
  d.n = s.n;
  d.end = s.end;
}

void CudaBackend::gather(const Vector& w, SparseVector& xs) {
  CudaSparse& x = X(xs);
  check_index(x, w.size());
  launch_map(x.n, GatherOp{x.index.get(), x.value.get(), P(w)}, stream_);
}

void CudaBackend::scatter(const SparseVector& xs, Vector& w) {
  const CudaSparse& x = X(xs);
  check_index(x, w.size());
  launch_map(x.n, ScatterOp{x.index.get(), x.value.get(), P(w)}, stream_);
}

void CudaBackend::sparse_axpy(double a, const SparseVector& xs, Vector& y) {
  const CudaSparse& x = X(xs);
  check_index(x, y.size());
  launch_map(x.n, SparseAxpyOp{x.index.get(), x.value.get(), P(y), a}, stream_);
}

double CudaBackend::sparse_penalty(const SparseVector& xs, double c1, double c2) {
  const CudaSparse& x = X(xs);
  return reduce(x.n, PenaltyTerm{x.value.get(), c1, c2}, SumOp{}, 0.0, red_.get(), stream_);
}

void CudaBackend::lazy_decay(Vector& w, Vector& stamp, double clock, const Vector* rate, double coef,
                             const SparseVector* sup) {
  if (stamp.size() != w.size() || (rate && rate->size() != w.size()))
    throw Error("internal: lazy_decay vector sizes differ");
  LazyDecayOp op{nullptr, P(w), P(stamp), rate ? P(*rate) : nullptr, clock, coef};
  if (!sup) {
    launch_map(w.size(), op, stream_);
    return;
  }
  const CudaSparse& x = X(*sup);
  check_index(x, w.size());
  op.idx = x.index.get();
  launch_map(x.n, op, stream_);
}

double CudaBackend::sgd_l1_step(Vector& w, Vector* q, const SparseVector& gs, double eta, double u,
                                double c1, double c2, bool keep_q) {
  const CudaSparse& g = X(gs);
  if (q && q->size() != w.size()) throw Error("internal: sgd_l1_step vector sizes differ");
  check_index(g, w.size());
  const SgdL1Op step{g.index.get(), g.value.get(), P(w), q ? P(*q) : nullptr, eta, u, keep_q};
  if (c1 == 0 && c2 == 0) {  // no penalty wanted: a map, no host round trip
    launch_map(g.n, step, stream_);
    return 0.0;
  }
  return reduce(g.n, SgdL1PenaltyTerm{step, c1, c2}, SumOp{}, 0.0, red_.get(), stream_);
}

void CudaBackend::adf_step(Vector& w, const Vector& rate, Vector& count, const SparseVector& gs) {
  const CudaSparse& g = X(gs);
  if (rate.size() != w.size() || count.size() != w.size()) throw Error("internal: adf_step vector sizes differ");
  check_index(g, w.size());
  launch_map(g.n, AdfStepOp{g.index.get(), g.value.get(), P(w), P(rate), P(count)}, stream_);
}

void CudaBackend::adf_update_rates(Vector& rate, Vector& count, double window, double alpha,
                                   double beta) {
  same(rate, count);
  launch_map(rate.size(), AdfRatesOp{P(rate), P(count), window, alpha, beta}, stream_);
}

// ---- supports: built on the host, uploaded -----------------------------------------------

void CudaBackend::support_host(const Corpus& c, SentenceSpan span) {
  const std::size_t L = dims_.L, LL = L * L;
  if (mark_a_.size() < dims_.A) mark_a_.assign(dims_.A, 0);
  if (mark_e_.size() < dims_.E) mark_e_.assign(dims_.E, 0);
  attrs_.clear();
  edges_.clear();
  const bool has_edges = c.edge_offsets.size() == c.num_tokens() + 1;
  // Every id is checked before the first mark is set: a throw must not leave marks behind
  // (the attributes would silently drop out of every later support).
  for (std::size_t i = 0; i < span.count; ++i)
    if (span[i] >= c.num_sentences()) throw Error("internal: sentence id beyond the corpus");
  for (std::size_t i = 0; i < span.count; ++i) {
    const std::size_t s = span[i];
    const std::size_t t0 = c.sentence_offsets[s], t1 = c.sentence_offsets[s + 1];
    for (std::size_t k = c.state_offsets[t0]; k < c.state_offsets[t1]; ++k) {
      const std::uint32_t a = c.state_ids[k];
      if (!mark_a_[a]) {
        mark_a_[a] = 1;
        attrs_.push_back(a);
      }
    }
    if (has_edges)
      for (std::size_t k = c.edge_offsets[t0]; k < c.edge_offsets[t1]; ++k) {
        const std::uint32_t e = c.edge_ids[k];
        if (!mark_e_[e]) {
          mark_e_[e] = 1;
          edges_.push_back(e);
        }
      }
  }
  std::sort(attrs_.begin(), attrs_.end());
  std::sort(edges_.begin(), edges_.end());
  const bool trans = dims_.transitions && span.count > 0;
  h_index_.resize(attrs_.size() * L + (trans ? LL : 0) + edges_.size() * LL);
  std::size_t j = 0;
  for (std::uint32_t a : attrs_) {
    mark_a_[a] = 0;
    for (std::size_t y = 0; y < L; ++y) h_index_[j++] = std::size_t(a) * L + y;
  }
  if (trans)
    for (std::size_t k = 0; k < LL; ++k) h_index_[j++] = dims_.transition_offset() + k;
  for (std::uint32_t e : edges_) {
    mark_e_[e] = 0;
    for (std::size_t k = 0; k < LL; ++k) h_index_[j++] = dims_.edge_offset() + std::size_t(e) * LL + k;
  }
}

void CudaBackend::upload_sparse(CudaSparse& x, bool values) {
  const std::size_t n = h_index_.size();
  x.reserve(n);
  x.n = n;
  x.end = n ? h_index_.back() + 1 : 0;
  if (n) {
    CRFX_CUDA_CHECK(cudaMemcpyAsync(x.index.get(), h_index_.data(), n * sizeof(std::size_t),
                                    cudaMemcpyHostToDevice, stream_));
    if (values)
      CRFX_CUDA_CHECK(cudaMemcpyAsync(x.value.get(), h_value_.data(), n * sizeof(double),
                                      cudaMemcpyHostToDevice, stream_));
    else
      CRFX_CUDA_CHECK(cudaMemsetAsync(x.value.get(), 0, n * sizeof(double), stream_));
  }
  sync();  // the host staging vectors are reused by the next call
}

}  // namespace crfx::cuda::detail
