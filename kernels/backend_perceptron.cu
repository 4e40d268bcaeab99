// crfx — CudaBackend (cuda_backend.cuh): the perceptron's step left on the device (issue 37).
// ap at batch size 1 decoded, differenced and updated without a look from the host: Viterbi's
// path stays in the workspace (labels_), the feature difference is taken over the sentence's
// plan made once (select_sentence; perceptron_kernels.cu) and the updates of w and u are gated
// on the device by the path's mistakes. Bitwise the path of viterbi → feature_difference →
// sparse_axpy, which copied the path back, the difference up and waited twice a step.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "perceptron_kernels.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {
namespace {

/// SparseAxpyOp where the decoded span has a mistake (*gate ≠ 0); nothing otherwise.
struct GatedSparseAxpyOp {
  const std::size_t* idx;
  const double* val;
  double* y;
  double a;
  const std::uint32_t* gate;
  __device__ void operator()(std::size_t j) const {
    if (*gate != 0) y[idx[j]] += a * val[j];
  }
};

}  // namespace

bool CudaBackend::perceptron_step(const BackendCorpus& bc, SentenceSpan span, Vector& w, Vector* u, double u_scale,
                                  SparseVector& delta) {
  const CudaCorpus& c = C(bc);
  if (span.count != 1 || c.stream) return false;  // the primitives' path (a plan copied per step)
  if (w.size() != dims_.num_weights() || (u && u->size() != w.size()))
    throw Error("internal: weight vector size mismatch");
  CudaSparse& x = X(delta);
  // The plan first: it refuses an unlabeled sentence before anything is queued.
  sentence_support(c, span[0], x);  // x ← S({sid}), sp_plan_ ← its plan made once
  prepare(w);
  plan(c, span, 0);
  const std::size_t rows = h_slots_[1];
  run_chunk_front(c, w, 1, rows, false);
  ViterbiParams vp;
  static_cast<DecodeInputs&>(vp) = decode_inputs(arrays(c), w);
  vp.d = la_.get();
  vp.back = back_.get();
  vp.out = labels_.get();
  vp.score = nullptr;
  launch_viterbi(vp, 1, threads_, stream_);
  if (mistakes_.size() == 0) mistakes_.resize(1);
  const DecodedRows d{sp_plan_.dev_row_tok, c.labels.get(), labels_.get(), rows};
  launch_feature_difference(device_groups(), sp_plan_.view(), sp_plan_.ng, d, 1.0, x.value.get(), mistakes_.get(),
                            stream_);
  launch_map(x.n, GatedSparseAxpyOp{x.index.get(), x.value.get(), P(w), 1.0, mistakes_.get()}, stream_);
  if (u) launch_map(x.n, GatedSparseAxpyOp{x.index.get(), x.value.get(), P(*u), u_scale, mistakes_.get()}, stream_);
  return true;
}

}  // namespace crfx::cuda::detail
