// crfx — code that both the host compiler and CUDA device code compile: the qualifier macro and
// arithmetic that is never fused (nvcc contracts a·b + c into one FMA in device code unless told
// not to; host code is built with -ffp-contract=off), so that the two backends round alike.
#pragma once

#include <math.h>

#ifdef __CUDACC__
#define CRFX_HOST_DEVICE __host__ __device__
#else
#define CRFX_HOST_DEVICE
#endif

namespace crfx {

CRFX_HOST_DEVICE inline double mul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
CRFX_HOST_DEVICE inline double sub_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

}  // namespace crfx
