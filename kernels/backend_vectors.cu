// crfx — CudaBackend (cuda_backend.cuh): vectors on the device — allocation, host copies and swap.
// Their algebra (fill, axpy, dot, the fused forms …) is Backend's, element rules run by apply_rule
// (host/backend/vector_rules.hpp, backend_rules.cu).
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "cuda_backend.cuh"
#include "cuda_check.cuh"

namespace crfx::cuda::detail {

// ---- vectors ---------------------------------------------------------------------------

VectorPtr CudaBackend::vector(std::size_t n) {
  auto v = std::make_unique<CudaVector>(this, n);
  if (n) CRFX_CUDA_CHECK(cudaMemsetAsync(v->buf.get(), 0, n * sizeof(double), stream_));
  return v;
}

void CudaBackend::write(Vector& dst, const double* src) {
  auto& d = V(dst);
  if (d.size())
    CRFX_CUDA_CHECK(cudaMemcpyAsync(d.get(), src, d.size() * sizeof(double), cudaMemcpyHostToDevice, stream_));
  sync();
}

void CudaBackend::read(const Vector& src, double* dst) {
  const auto& s = V(src);
  if (s.size())
    CRFX_CUDA_CHECK(cudaMemcpyAsync(dst, s.get(), s.size() * sizeof(double), cudaMemcpyDeviceToHost, stream_));
  sync();
}

void CudaBackend::swap(Vector& x, Vector& y) {
  same(x, y);
  std::swap(V(x), V(y));  // the device buffers change hands; nothing is copied
}

}  // namespace crfx::cuda::detail
