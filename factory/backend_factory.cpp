// crfx — choosing a backend: --device auto | cpu | cuda. The one file that knows both backends,
// the CPU's (host/cpu) and the CUDA library's (kernels/), so it stands above both, outside host/:
// host/ never includes kernels/ (cmake/check_layering.cmake), whose kernels include host/rules.
#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"

#include <unistd.h>

#ifdef CRFX_HAVE_CUDA
#include "../kernels/cuda_api.hpp"
#endif

namespace crfx {

DeviceKind parse_device(const std::string& s) {
  if (s == "auto") return DeviceKind::auto_select;
  if (s == "cpu") return DeviceKind::cpu;
  if (s == "cuda") return DeviceKind::cuda;
  throw Error("unknown device '" + s + "' (expected auto, cpu or cuda)");
}

std::string cpu_vector_code() {
  std::string code = cpu_rows_avx512() ? "AVX-512 state rows (observed pairs), " : "scalar state rows, ";
  return code + (cpu_simd_avx2() ? "AVX2 chain" : "SSE2 chain");
}

namespace {

/// A --device cuda failure, with the way out when it does not name it already.
std::string with_cpu_hint(const std::string& why) {
  return why.find("--device cpu") == std::string::npos ? why + "; --device cpu runs on the CPU" : why;
}

}  // namespace

std::string gpu_unavailable() {
#ifdef CRFX_HAVE_CUDA
  std::string why;
  const int n = cuda::device_count(&why);
  if (n == 0) {
    // The CUDA runtime reports a missing driver as "driver version is insufficient": say what it is.
    if (::access("/proc/driver/nvidia/version", F_OK) != 0 && ::access("/dev/nvidia0", F_OK) != 0)
      return "no NVIDIA driver on this machine";
    return "no usable CUDA device (" + why + ")";
  }
  if (!cuda::self_test(0, &why)) return "CUDA device 0 cannot run this build's kernels (" + why + ")";
  return "";
#else
  return "this crfx was built without CUDA (CRFX_CUDA=OFF or no nvcc at configure time)";
#endif
}

void check_device(const BackendOptions& options) {
  if (options.device != DeviceKind::cuda) return;
  const std::string why = gpu_unavailable();
  if (!why.empty()) throw Error("--device cuda: " + with_cpu_hint(why));
}

BackendPtr make_backend(const Dims& dims, const BackendOptions& options, std::string* note,
                        std::string* fallback_out) {
  std::string fallback;
  if (options.device != DeviceKind::cpu) {
    fallback = gpu_unavailable();
    if (options.device == DeviceKind::cuda && !fallback.empty())
      throw Error("--device cuda: " + with_cpu_hint(fallback));
#ifdef CRFX_HAVE_CUDA
    if (fallback.empty()) {
      BackendPtr backend;
      try {
        cuda::CudaBackendConfig config;
        std::string why;
        const int devices = cuda::device_count(&why);
        if (devices > 0 && options.cuda_device > 0) config.device = options.cuda_device % devices;
        config.host_threads = options.threads;
        backend = cuda::make_cuda_backend(dims, config);
      } catch (const Error& e) {  // e.g. more labels than the kernels handle
        if (options.device == DeviceKind::cuda)
          throw Error(std::string("--device cuda: ") + with_cpu_hint(e.what()));
        fallback = e.what();
      }
      if (backend) {
        if (note) *note = "device: " + backend->name();
        return backend;
      }
    }
#endif
  }
  auto backend = std::make_unique<CpuBackend>(dims, options.threads, options.log_space_only);
  if (fallback_out) *fallback_out = fallback;
  if (note) {
    *note = "device: " + backend->name();
    if (!fallback.empty() && !fallback_out) *note += " (auto: " + fallback + "; using the CPU)";
  }
  return backend;
}

}  // namespace crfx
