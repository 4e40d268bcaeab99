// crfx — the one CUDA error path: every runtime call is checked (launches through CRFX_LAUNCH in
// launch.cuh), and a failure throws crfx::CudaError with the expression, function, file and line.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "crfx/errors.hpp"

namespace crfx {

class CudaError : public Error {
 public:
  using Error::Error;
};

/// Throws for `err`, first clearing the thread's last-error state (cudaGetLastError), so a
/// caught failure — an allocation refused, then retried smaller — is not reported again by
/// the next unrelated check. A sticky error (a fault inside a kernel) cannot be cleared: every
/// later call reports it, as it must.
[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* func,
                                          const char* file, int line) {
  (void)cudaGetLastError();
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
