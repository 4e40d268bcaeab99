// crfx — the one CUDA error path: every runtime call and every launch is checked, and a failure
// throws crfx::CudaError with the expression, function, file and line.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "crfx/error.hpp"

namespace crfx {

class CudaError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* func,
                                          const char* file, int line) {
  throw CudaError(std::string("CUDA error: ") + cudaGetErrorString(err) + " (" +
                  cudaGetErrorName(err) + ") in " + expr + " at " + func + " " + file + ":" +
                  std::to_string(line));
}

}  // namespace crfx

#define CRFX_CUDA_CHECK(expr)                                                         \
  do {                                                                                \
    cudaError_t crfx_err_ = (expr);                                                   \
    if (crfx_err_ != cudaSuccess)                                                     \
      ::crfx::throw_cuda_error(crfx_err_, #expr, __func__, __FILE__, __LINE__);       \
  } while (0)

// After every kernel launch. With -DCRFX_SYNC_LAUNCHES=ON it also synchronises, so an
// asynchronous fault is reported at the launch that caused it.
#ifdef CRFX_SYNC_LAUNCHES
#define CRFX_CUDA_CHECK_LAUNCH()                   \
  do {                                             \
    CRFX_CUDA_CHECK(cudaGetLastError());           \
    CRFX_CUDA_CHECK(cudaDeviceSynchronize());      \
  } while (0)
#else
#define CRFX_CUDA_CHECK_LAUNCH() CRFX_CUDA_CHECK(cudaGetLastError())
#endif
