// crfx — CudaBackend (cuda_backend.cuh): vectors on the device — allocation and host copies, the
// vector algebra, OWL-QN's element-wise steps and the fused quasi-Newton forms, as element-wise
// maps and deterministic reductions (vector_ops.cuh).
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "vector_ops.cuh"

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

void CudaBackend::fill(Vector& x, double value) { launch_map(x.size(), FillOp{P(x), value}, stream_); }

void CudaBackend::copy(const Vector& src, Vector& dst) {
  same(src, dst);
  if (src.size())
    CRFX_CUDA_CHECK(cudaMemcpyAsync(P(dst), P(src), src.size() * sizeof(double), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::scale(double a, Vector& x) { launch_map(x.size(), ScaleOp{P(x), a}, stream_); }

void CudaBackend::axpy(double a, const Vector& x, Vector& y) {
  same(x, y);
  launch_map(x.size(), AxpyOp{P(x), P(y), a}, stream_);
}

void CudaBackend::axpby(double a, const Vector& x, double b, Vector& y) {
  same(x, y);
  launch_map(x.size(), AxpbyOp{P(x), P(y), a, b}, stream_);
}

void CudaBackend::sub(const Vector& x, const Vector& y, Vector& out) {
  same(x, y);
  same(x, out);
  launch_map(x.size(), SubOp{P(x), P(y), P(out)}, stream_);
}

double CudaBackend::dot(const Vector& x, const Vector& y) {
  same(x, y);
  return reduce(x.size(), DotTerm{P(x), P(y)}, SumOp{}, 0.0, red_.get(), stream_);
}

double CudaBackend::norm1(const Vector& x) {
  return reduce(x.size(), AbsTerm{P(x)}, SumOp{}, 0.0, red_.get(), stream_);
}

double CudaBackend::norm2sq(const Vector& x) { return dot(x, x); }

double CudaBackend::norm_inf(const Vector& x) {
  return reduce(x.size(), AbsTerm{P(x)}, MaxOp{}, 0.0, red_.get(), stream_);
}

std::size_t CudaBackend::count_nonzero(const Vector& x) {
  return std::size_t(reduce(x.size(), NonzeroTerm{P(x)}, SumOp{}, 0.0, red_.get(), stream_));  // exact < 2^53
}

void CudaBackend::swap(Vector& x, Vector& y) {
  same(x, y);
  std::swap(V(x), V(y));  // the device buffers change hands; nothing is copied
}

void CudaBackend::scaled_copy(double a, const Vector& x, Vector& y) {
  same(x, y);
  launch_map(x.size(), ScaledCopyOp{P(x), P(y), a}, stream_);
}

void CudaBackend::add_scaled(const Vector& x, double a, const Vector& d, Vector& out) {
  same(x, d);
  same(x, out);
  if (&out == &d) throw Error("internal: add_scaled with out = d");
  launch_map(x.size(), AddScaledOp{P(x), P(d), P(out), a}, stream_);
}

double CudaBackend::axpy_dot(double a, const Vector& x, Vector& y, const Vector& z) {
  same(x, y);
  same(x, z);
  return reduce(x.size(), AxpyDotTerm{P(x), P(y), P(z), a}, SumOp{}, 0.0, red_.get(), stream_);
}

double CudaBackend::scale_dot(double a, Vector& x, const Vector& z) {
  same(x, z);
  return reduce(x.size(), ScaleDotTerm{P(x), P(z), a}, SumOp{}, 0.0, red_.get(), stream_);
}

double CudaBackend::axpy_norm2sq(double a, const Vector& x, Vector& y) {
  same(x, y);
  return reduce(x.size(), AxpyNormTerm{P(x), P(y), a}, SumOp{}, 0.0, red_.get(), stream_);
}

double CudaBackend::sub_dot(const Vector& x, const Vector& y, Vector& out, const Vector& z) {
  same(x, y);
  same(x, out);
  same(x, z);
  return reduce(x.size(), SubDotTerm{P(x), P(y), P(out), P(z)}, SumOp{}, 0.0, red_.get(), stream_);
}

}  // namespace crfx::cuda::detail
