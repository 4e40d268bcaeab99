// crfx — the CUDA backend's element-wise maps over [0, n) (map_kernel with the op structs of the
// sparse primitives and, through backend_rules.cu, the element rules: the vector algebra's and
// the optimizers') and the deterministic two-pass reduction (reduce_pass1 / reduce_pass2, driven
// by reduce()). Templates: every backend file that launches one includes this header.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cub/block/block_reduce.cuh>

#include "rules/elastic_net.hpp"

#include "common.cuh"
#include "cuda_check.cuh"
#include "device_buffer.cuh"
#include "launch.cuh"

namespace crfx::cuda::detail {

// ---- element-wise maps (element rules, sparse primitives) --------------------------------------

template <class F>
__global__ void map_kernel(std::size_t n, F f) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    f(i);
}

template <class F>
void launch_map(std::size_t n, F f, cudaStream_t s) {
  if (n == 0) return;
  CRFX_LAUNCH(map_kernel<F>, grid_for(n, kMapThreads), kMapThreads, 0, s, n, f);
}

// Sparse primitives (entries distinct: no races), as CpuBackend.
struct GatherOp {
  const std::size_t* idx;
  double* val;
  const double* w;
  __device__ void operator()(std::size_t j) const { val[j] = w[idx[j]]; }
};
struct ScatterOp {
  const std::size_t* idx;
  const double* val;
  double* w;
  __device__ void operator()(std::size_t j) const { w[idx[j]] = val[j]; }
};
struct SparseAxpyOp {
  const std::size_t* idx;
  const double* val;
  double* y;
  double a;
  __device__ void operator()(std::size_t j) const { y[idx[j]] += a * val[j]; }
};
/// SparseAxpyOp where a step's gate on the device is set (*gate ≠ 0: ap's decoded mistakes, pa's
/// τ ≠ 0; issue 37), with a a launch parameter (A = double: ap's 1, u's t − 1) or read on the
/// device (A = const double*: pa's τ, u's (t − 1)·τ). Made by gated_axpy.
template <class A, class Gate>
struct GatedSparseAxpyOp {
  const std::size_t* idx;
  const double* val;
  double* y;
  A a;
  const Gate* gate;
  __device__ static double scale(double x) { return x; }
  __device__ static double scale(const double* x) { return *x; }
  __device__ void operator()(std::size_t j) const {
    if (*gate != 0) y[idx[j]] += scale(a) * val[j];
  }
};
template <class A, class Gate>
GatedSparseAxpyOp<A, Gate> gated_axpy(const std::size_t* idx, const double* val, double* y, A a, const Gate* gate) {
  return {idx, val, y, a, gate};
}
struct PenaltyTerm {
  const double* v;
  double c1, c2;
  __device__ double operator()(std::size_t j) const { return penalty_term(v[j], c1, c2); }
};

// ---- deterministic reductions ------------------------------------------------------------------
// Pass 1: a fixed grid (its size a function of n only) of kRedThreads-thread blocks; thread k
// folds elements k, k + stride, … in order, then cub::BlockReduce (a fixed shuffle/shared-memory
// tree) gives one partial per block. Pass 2: one block folds the partials the same way.

struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct MaxOp {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};
struct DotTerm {  // SAG's ‖g‖² (backend_sag.cu)
  const double* x;
  const double* y;
  __device__ double operator()(std::size_t i) const { return x[i] * y[i]; }
};

template <class F, class Op>
__global__ void __launch_bounds__(kRedThreads) reduce_pass1(std::size_t n, F f, Op op, double init,
                                                            double* partial) {
  using BlockReduce = cub::BlockReduce<double, kRedThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  double acc = init;
  for (std::size_t i = blockIdx.x * std::size_t(kRedThreads) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * kRedThreads)
    acc = op(acc, f(i));
  const double r = BlockReduce(tmp).Reduce(acc, op);
  if (threadIdx.x == 0) partial[blockIdx.x] = r;
}

template <class Op>
__global__ void __launch_bounds__(kRedThreads) reduce_pass2(unsigned m, const double* partial, Op op,
                                                            double init, double* out) {
  using BlockReduce = cub::BlockReduce<double, kRedThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  double acc = init;
  for (unsigned i = threadIdx.x; i < m; i += kRedThreads) acc = op(acc, partial[i]);
  const double r = BlockReduce(tmp).Reduce(acc, op);
  if (threadIdx.x == 0) *out = r;
}

/// reduce()'s two passes alone: the result left at red + kRedBlocks on the device (n = 0: pass 2
/// alone folds `init` over its threads — init itself for a sum from 0 or a max).
template <class F, class Op>
void reduce_on_device(std::size_t n, F f, Op op, double init, double* red, cudaStream_t s) {
  const unsigned blocks = n ? grid_for(n, kRedThreads, kRedBlocks) : 0;  // a function of n only
  if (n) CRFX_LAUNCH((reduce_pass1<F, Op>), blocks, kRedThreads, 0, s, n, f, op, init, red);
  CRFX_LAUNCH(reduce_pass2<Op>, 1, kRedThreads, 0, s, blocks, red, op, init, red + kRedBlocks);
}

/// op over f(0) … f(n − 1) from `init` (init when n = 0), bitwise reproducible: the two passes
/// above through `red` (kRedBlocks partials, then the result at red + kRedBlocks), then a copy to
/// the host and a synchronisation of `s`.
template <class F, class Op>
double reduce(std::size_t n, F f, Op op, double init, double* red, cudaStream_t s) {
  if (n == 0) return init;
  reduce_on_device(n, f, op, init, red, s);
  double r = 0;
  CRFX_CUDA_CHECK(cudaMemcpyAsync(&r, red + kRedBlocks, sizeof(double), cudaMemcpyDeviceToHost, s));
  CRFX_CUDA_CHECK(cudaStreamSynchronize(s));
  return r;
}

}  // namespace crfx::cuda::detail
