// crfx — device discovery and the launch self-test.
#include <cstdio>
#include <vector>

#include "cuda_api.hpp"
#include "cuda_check.cuh"
#include "device_buffer.cuh"
#include "launch.cuh"

namespace crfx::cuda {
namespace {

__global__ void __launch_bounds__(256) saxpy_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = std::string(cudaGetErrorString(err));
    cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device found";
  return n;
}

std::string device_description(int device) {
  cudaDeviceProp prop{};
  CRFX_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
                double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

bool self_test(int device, std::string* why) {
  try {
    CRFX_CUDA_CHECK(cudaSetDevice(device));
    const int n = 1000;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
      x[i] = float(i);
      y[i] = 1.0f;
    }
    detail::DeviceBuffer<float> dx(n), dy(n);  // freed on every path, the error one included
    CRFX_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CRFX_CUDA_CHECK(cudaMemcpy(dy.get(), y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CRFX_LAUNCH(saxpy_kernel, (n + 255) / 256, 256, 0, nullptr, n, 2.0f, dx.get(), dy.get());
    CRFX_CUDA_CHECK(cudaMemcpy(y.data(), dy.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      if (y[i] != 2.0f * float(i) + 1.0f) {
        if (why) *why = "self-test kernel computed a wrong result";
        return false;
      }
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

}  // namespace crfx::cuda
