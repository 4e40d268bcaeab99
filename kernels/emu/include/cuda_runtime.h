// crfx — the CUDA execution-model emulation (test infrastructure; never part of an nvcc build).
//
// g++ compiles the project's kernel files against this header instead of the CUDA toolkit's: the
// qualifiers, the built-in indices, barriers, warp collectives, atomics, intrinsics and the part of
// the runtime API crfx calls, all executed on the CPU by kernels/emu/scheduler.cpp (threads as
// fibers that switch only at barriers and warp collectives, in a seeded order) and
// kernels/emu/runtime.cpp (device memory as host memory with a budget, streams as ordered queues).
// What it proves and what only a GPU can: see docs/ARCHITECTURE.md, "The emulated device".
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#ifndef CRFX_EMULATED_CUDA
#error "kernels/emu/include is only for the emulated build (CRFX_EMULATED_CUDA)"
#endif

// ---- qualifiers --------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
// Static shared memory: one object per OS thread, shared by the block's fibers (blocks of a launch
// run one after another on the launching thread). Its contents are undefined at block start, as on
// hardware.
#define __shared__ static thread_local
#define __constant__ static

// ---- vector types and built-in indices -------------------------------------------------------------
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
using uint3 = dim3;

namespace crfx::emu::detail {
const dim3& thread_idx();
const dim3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();
void syncthreads(const char* file, int line);
/// bar.sync id, count: waits until `count` threads of the block wait at named barrier `id`.
void named_barrier(unsigned id, unsigned count, const char* file, int line);
enum class Collective : std::uint8_t { shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all, syncwarp };
/// Waits at a warp collective until every lane of `mask` is there; returns this lane's result
/// (the shuffled bytes, or the vote as a mask in the first four bytes).
void warp_collective(Collective kind, unsigned mask, const void* value, std::size_t size, int param, int width,
                     void* result, const char* file, int line);
unsigned active_mask();
}  // namespace crfx::emu::detail

#define threadIdx (::crfx::emu::detail::thread_idx())
#define blockIdx (::crfx::emu::detail::block_idx())
#define blockDim (::crfx::emu::detail::block_dim())
#define gridDim (::crfx::emu::detail::grid_dim())
constexpr int warpSize = 32;

// ---- barriers and warp collectives -------------------------------------------------------------
#define __syncthreads() ::crfx::emu::detail::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) ::crfx::emu::detail::syncwarp_at(__FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_sync(mask, var, lane, ...) \
  ::crfx::emu::detail::shfl_at(::crfx::emu::detail::Collective::shfl_idx, mask, var, lane, __FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_up_sync(mask, var, delta, ...) \
  ::crfx::emu::detail::shfl_at(::crfx::emu::detail::Collective::shfl_up, mask, var, delta, __FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_down_sync(mask, var, delta, ...) \
  ::crfx::emu::detail::shfl_at(::crfx::emu::detail::Collective::shfl_down, mask, var, delta, __FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_xor_sync(mask, var, lane_mask, ...) \
  ::crfx::emu::detail::shfl_at(::crfx::emu::detail::Collective::shfl_xor, mask, var, lane_mask, __FILE__, __LINE__, ##__VA_ARGS__)
#define __ballot_sync(mask, pred) \
  ::crfx::emu::detail::vote_at(::crfx::emu::detail::Collective::ballot, mask, pred, __FILE__, __LINE__)
#define __any_sync(mask, pred) \
  (::crfx::emu::detail::vote_at(::crfx::emu::detail::Collective::any, mask, pred, __FILE__, __LINE__) != 0)
#define __all_sync(mask, pred) \
  (::crfx::emu::detail::vote_at(::crfx::emu::detail::Collective::all, mask, pred, __FILE__, __LINE__) != 0)
#define __activemask() ::crfx::emu::detail::active_mask()

namespace crfx::emu::detail {
inline void syncwarp_at(const char* file, int line, unsigned mask = 0xffffffffu) {
  warp_collective(Collective::syncwarp, mask, nullptr, 0, 0, 32, nullptr, file, line);
}
template <class T>
T shfl_at(Collective kind, unsigned mask, T var, int param, const char* file, int line, int width = 32) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 16, "shuffle of an unsupported type");
  T out;
  warp_collective(kind, mask, &var, sizeof(T), param, width, &out, file, line);
  return out;
}
inline unsigned vote_at(Collective kind, unsigned mask, bool pred, const char* file, int line) {
  unsigned out = 0;
  const int p = pred ? 1 : 0;
  warp_collective(kind, mask, &p, sizeof p, 0, 32, &out, file, line);
  return out;
}
}  // namespace crfx::emu::detail

// ---- atomics (threads switch only at barriers and collectives: a read-modify-write is atomic) ---
template <class T>
inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T>
inline T atomicSub(T* p, T v) {
  const T old = *p;
  *p = old - v;
  return old;
}
template <class T>
inline T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T>
inline T atomicMin(T* p, T v) {
  const T old = *p;
  if (v < old) *p = v;
  return old;
}
template <class T>
inline T atomicExch(T* p, T v) {
  const T old = *p;
  *p = v;
  return old;
}
template <class T>
inline T atomicCAS(T* p, T compare, T v) {
  const T old = *p;
  if (old == compare) *p = v;
  return old;
}

// ---- intrinsics and device math --------------------------------------------------------------------
// Explicitly rounded arithmetic: the emulated build is compiled with -ffp-contract=off, so a + b and
// a * b are each rounded once, as __dadd_rn / __dmul_rn are on the GPU.
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffs(unsigned x) { return __builtin_ffs(int(x)); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline double __longlong_as_double(long long x) {
  double d;
  std::memcpy(&d, &x, sizeof d);
  return d;
}
inline long long __double_as_longlong(double d) {
  long long x;
  std::memcpy(&x, &d, sizeof x);
  return x;
}
using std::isfinite;
using std::isinf;
using std::isnan;
// CUDA's min/max overloads (device and host), for mixed integer types as well.
template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(a) < C(b) ? C(a) : C(b);
}
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(a) < C(b) ? C(b) : C(a);
}

// ---- the runtime API (the subset crfx uses; numbering as CUDA's) ---------------------------------
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorUnknown = 999,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute : int {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
constexpr unsigned cudaStreamDefault = 0x0;
constexpr unsigned cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaHostAllocDefault = 0x0;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventDisableTiming = 0x2;

struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  std::size_t sharedMemPerBlockOptin;
  std::size_t sharedMemPerMultiprocessor;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
  int maxThreadsPerMultiProcessor;
  int clockRate;
  int memoryClockRate;
  int memoryBusWidth;
  std::size_t l2CacheSize;
};

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceReset();
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t err);
const char* cudaGetErrorName(cudaError_t err);

cudaError_t cudaMalloc(void** p, std::size_t bytes);
template <class T>
cudaError_t cudaMalloc(T** p, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, std::size_t bytes);
cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* p, int value, std::size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
/// Work queued on `s` after this call waits for the work queued before the last
/// cudaEventRecord(e, …) on that record's stream (nothing to wait for when e was never recorded).
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);

cudaError_t cudaFuncSetAttributeImpl(const void* func, cudaFuncAttribute attr, int value);
template <class F>
cudaError_t cudaFuncSetAttribute(F* func, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttributeImpl(reinterpret_cast<const void*>(func), attr, value);
}
