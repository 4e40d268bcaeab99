// crfx — CudaBackend (cuda_backend.cuh): the stochastic trainers' primitives — sparse vectors on
// the device, supports and perceptron feature differences (built on the host and uploaded),
// evaluate_sparse (through the span plans of backend_sag.cu), and the sparse element-wise
// primitives (gather, scatter, axpy, penalty) as maps and reductions (vector_ops.cuh).
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

// ---- sparse batch gradients ---------------------------------------------------------------

SparseVectorPtr CudaBackend::sparse_vector() { return std::make_unique<CudaSparse>(this); }

void CudaBackend::support(const BackendCorpus& bc, SentenceSpan span, SparseVector& xs) {
  const CudaCorpus& c = C(bc);
  if (span.count == 1 && span[0] < c.S && c.h_labeled[span[0]] && !c.stream) {  // from the plans made once
    sentence_support(c, span[0], X(xs));
    return;
  }
  if (batch_support(c, span, X(xs))) return;  // a batch: S(batch) built on the device
  support_host(c.host, span);
  upload_sparse(X(xs), false);
}

double CudaBackend::evaluate_sparse(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                                    SparseVector& grad, double scale, bool support_given,
                                    SequenceLoss loss_kind) {
  return sparse_pass(C(bc), w, span, X(grad), scale, support_given, loss_kind, true);
}

void CudaBackend::evaluate_sparse_gradient(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                                           SparseVector& grad, double scale, bool support_given,
                                           SequenceLoss loss_kind) {
  // A pointwise loss is read back all the same: its check (check_pointwise) needs it.
  const bool on_device = span.count == 1 && !pointwise_loss(loss_kind);
  if (batch_gradient(C(bc), w, span, X(grad), scale, support_given, loss_kind)) return;  // a batch, on the device
  sparse_pass(C(bc), w, span, X(grad), scale, support_given, loss_kind, !on_device);
}

double CudaBackend::sparse_pass(const CudaCorpus& c, const Vector& w, SentenceSpan span, CudaSparse& x,
                                double scale, bool support_given, SequenceLoss loss_kind, bool loss_to_host) {
  // Span-local: the plan's groups are S(span) in index order, so the span gradient lands
  // directly in the sparse vector's values (O(span items), not a scan of the corpus).
  if (w.size() != dims_.num_weights()) throw Error("internal: weight vector size mismatch");
  if (span.count == 1)  // batch size 1: the plan made once (plan_sentences), nothing copied
    select_sentence(c, span[0], sp_plan_);
  else
    plan_span(c, span, nullptr, false, sp_plan_);
  const double loss = span_marginals(c, w, sp_plan_, sp_node_, sp_pair_, sp_edge_, loss_kind, loss_to_host);
  if (support_given) {
    // grad's indices on the device are S(span) from support(); its length must be the plan's.
    if (x.n != sp_plan_.compact())
      throw Error("internal: evaluate_sparse given a support of " + std::to_string(x.n) +
                  " entries for a span whose support has " + std::to_string(sp_plan_.compact()));
    if (x.n) CRFX_CUDA_CHECK(cudaMemsetAsync(x.value.get(), 0, x.n * sizeof(double), stream_));
  } else if (span.count == 1) {
    sentence_support(c, span[0], x);
  } else {
    group_indices(dims_.groups(), sp_plan_.groups, h_index_);
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
  h_dense_.resize(dims_.num_weights(), 0.0);  // kept all-zero between calls
  double* Gh = h_dense_.data();
  auto take = [&] {
    h_value_.resize(h_index_.size());
    for (std::size_t j = 0; j < h_index_.size(); ++j) {
      h_value_[j] = Gh[h_index_[j]];
      Gh[h_index_[j]] = 0.0;
    }
  };
  std::size_t wrong = 0;
  try {
    wrong = add_feature_difference(c, dims_, span, labels, scale, Gh);
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

// ---- supports: built on the host, uploaded -----------------------------------------------

void CudaBackend::support_host(const Corpus& c, SentenceSpan span) {
  for (std::size_t i = 0; i < span.count; ++i)  // checked before the plan: a refused span changes nothing
    if (span[i] >= c.num_sentences()) throw Error("internal: sentence id beyond the corpus");
  support_groups_.support(c, span, dims_.groups(), dims_.transitions && span.count > 0, h_index_);
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
