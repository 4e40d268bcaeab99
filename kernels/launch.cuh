// crfx — single-source kernel launches. The kernel files compile under nvcc (real GPU) and under
// g++ against the CUDA execution-model emulation in kernels/emu (CI); this header is the only
// place where the two differ for launches and dynamic shared memory:
//
//   CRFX_LAUNCH(kernel, grid, block, smem, stream, args…)   kernel<<<grid, block, smem, stream>>>
//                                                            then the launch check (name, file, line)
//   CRFX_DYNAMIC_SHARED(T, name);                            extern __shared__ T name[];
//
// A template kernel goes in parentheses: CRFX_LAUNCH((reduce_pass1<F, Op>), …).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda_check.cuh"

#ifdef CRFX_EMULATED_CUDA
#include "emu/emu_launch.hpp"
#define CRFX_DYNAMIC_SHARED(T, name) T* name = ::crfx::emu::dynamic_shared<T>()
#else
#define CRFX_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

namespace crfx::cuda {

/// Launches `kernel` (the real launch, or the emulated one) and checks the launch: a refused
/// configuration throws CudaError naming the kernel and the call site. Arguments are converted to
/// the kernel's parameter types, i.e. copied by value, as a real launch does.
template <class... Params, class... Args>
void launch_kernel(const char* name, const char* file, int line, void (*kernel)(Params...), dim3 grid,
                   dim3 block, std::size_t smem, cudaStream_t stream, Args&&... args) {
#ifdef CRFX_EMULATED_CUDA
  ::crfx::emu::launch(name, kernel, grid, block, smem, stream, Params(std::forward<Args>(args))...);
#else
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
#endif
  cudaError_t err = cudaGetLastError();
#ifdef CRFX_SYNC_LAUNCHES
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
#endif
  if (err != cudaSuccess) throw_cuda_error(err, name, "launch", file, line);
}

}  // namespace crfx::cuda

#define CRFX_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::crfx::cuda::launch_kernel(#kernel, __FILE__, __LINE__, kernel, grid, block, smem, stream, __VA_ARGS__)
