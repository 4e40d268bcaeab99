// crfx — the emulated device's runtime API: one simulated H100 (132 SMs, sm_90, 80 GB) whose device
// memory is host memory with a budget, and whose streams are ordered queues.
//
// - cudaMalloc allocates host memory (so AddressSanitizer sees a kernel's out-of-bounds access as
//   compute-sanitizer's memcheck would), fills it with a signalling-NaN pattern and surrounds it with
//   canaries that are checked after every launch and at cudaFree. The budget (set_memory_budget,
//   CRFX_EMU_MEMORY) bounds the sum of live allocations and is what cudaMemGetInfo reports, so the
//   chunking and out-of-memory paths run; fail_allocation() fails a chosen allocation.
// - Copies and memsets name device ranges that must lie inside one live allocation.
// - Asynchronous work (launches, copies, memsets) is queued per stream and runs at the next
//   synchronisation point (stream or device synchronise, a synchronous copy, cudaFree), in stream
//   order: a host buffer reused before the stream is synchronised shows up as wrong data.
// - Errors behave as the runtime's: a failing call returns its error and records it as the last
//   error (cudaGetLastError returns and clears it); a kernel that fails while running leaves a
//   sticky error that every later call returns. cudaGetErrorString gives the emulation's detailed
//   message for the error it last recorded.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "emu_internal.hpp"
#include "emu_launch.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define CRFX_EMU_ASAN 1
#endif

struct CUstream_st {
  unsigned flags = 0;
  std::deque<std::function<cudaError_t()>> queue;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point time{};
  bool recorded = false;
  // cudaStreamWaitEvent: the stream of the last record and its number (numbered per device at
  // the record call); `reached` is the number of the last record that ran.
  CUstream_st* stream = nullptr;
  std::uint64_t record = 0, reached = 0;
};

namespace crfx::emu {
namespace {

constexpr std::size_t kTotalBytes = std::size_t(80) * 1000 * 1000 * 1000;  // "80GB HBM3"
constexpr std::size_t kCanaryBytes = 16;
constexpr unsigned char kCanary = 0xCD;
constexpr std::size_t kSharedDefault = 48 * 1024, kSharedOptIn = 227 * 1024;

struct Allocation {
  unsigned char* raw;  // canary, user bytes, canary
  std::size_t size;
};

struct Device {
  std::recursive_mutex mutex;
  std::size_t budget = kTotalBytes, used = 0;
  std::size_t fail_countdown = 0;
  std::map<std::uintptr_t, Allocation> allocations;  // user address → allocation
  cudaError_t last = cudaSuccess, sticky = cudaSuccess;
  cudaError_t detail_code = cudaSuccess;
  std::string detail;  // message of the last recorded error
  std::uint64_t seed = 1, launches = 0;
  std::uint64_t event_records = 0;  // cudaEventRecord calls (the events' record numbers)
  std::map<std::string, std::size_t> counts;
  HostCounters host;  // what the host asked of the device (host_counters)
  std::map<const void*, int> max_dynamic_smem;
  CUstream_st legacy;  // stream 0
  std::set<CUstream_st*> streams;
  Device() {
    if (const char* m = std::getenv("CRFX_EMU_MEMORY")) budget = std::strtoull(m, nullptr, 10);
    if (budget == 0) budget = kTotalBytes;
    if (const char* s = std::getenv("CRFX_EMU_SEED")) seed = std::strtoull(s, nullptr, 10);
  }
};

Device& dev() {
  static Device d;
  return d;
}

using Lock = std::lock_guard<std::recursive_mutex>;

cudaError_t fail(cudaError_t err, std::string msg) {
  Device& d = dev();
  d.last = err;
  d.detail_code = err;
  d.detail = "crfx emulated device: " + msg;
  return err;
}

/// An error of a running kernel or a corrupted allocation: sticky, and printed at once.
cudaError_t fail_sticky(cudaError_t err, const std::string& msg) {
  Device& d = dev();
  fail(err, msg);
  d.sticky = err;
  std::fprintf(stderr, "%s\n", d.detail.c_str());
  for (CUstream_st* s : d.streams) s->queue.clear();
  d.legacy.queue.clear();
  return err;
}

/// The allocation holding [p, p + n), or null.
const Allocation* find_range(const void* p, std::size_t n) {
  Device& d = dev();
  const auto a = std::uintptr_t(p);
  auto it = d.allocations.upper_bound(a);
  if (it == d.allocations.begin()) return nullptr;
  --it;
  if (a < it->first || a - it->first > it->second.size || n > it->second.size - (a - it->first)) return nullptr;
  return &it->second;
}

bool canaries_intact(const Allocation& al) {
#ifdef CRFX_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(al.raw, kCanaryBytes);
  ASAN_UNPOISON_MEMORY_REGION(al.raw + kCanaryBytes + al.size, kCanaryBytes);
#endif
  bool ok = true;
  for (std::size_t i = 0; i < kCanaryBytes; ++i)
    ok = ok && al.raw[i] == kCanary && al.raw[kCanaryBytes + al.size + i] == kCanary;
#ifdef CRFX_EMU_ASAN
  ASAN_POISON_MEMORY_REGION(al.raw, kCanaryBytes);
  ASAN_POISON_MEMORY_REGION(al.raw + kCanaryBytes + al.size, kCanaryBytes);
#endif
  return ok;
}

void restore_canaries(const Allocation& al) {
#ifdef CRFX_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(al.raw, kCanaryBytes);
  ASAN_UNPOISON_MEMORY_REGION(al.raw + kCanaryBytes + al.size, kCanaryBytes);
#endif
  std::memset(al.raw, kCanary, kCanaryBytes);
  std::memset(al.raw + kCanaryBytes + al.size, kCanary, kCanaryBytes);
#ifdef CRFX_EMU_ASAN
  ASAN_POISON_MEMORY_REGION(al.raw, kCanaryBytes);
  ASAN_POISON_MEMORY_REGION(al.raw + kCanaryBytes + al.size, kCanaryBytes);
#endif
}

CUstream_st* stream_of(cudaStream_t s) { return s ? s : &dev().legacy; }

/// Runs the queued work of `s` in order; a failure makes the error sticky and drops the rest.
cudaError_t drain(CUstream_st* s) {
  Device& d = dev();
  while (!s->queue.empty() && d.sticky == cudaSuccess) {
    auto op = std::move(s->queue.front());
    s->queue.pop_front();
    const cudaError_t err = op();
    if (err != cudaSuccess) return err;
  }
  return d.sticky;
}

cudaError_t drain_all() {
  Device& d = dev();
  cudaError_t err = drain(&d.legacy);
  for (CUstream_st* s : d.streams)
    if (err == cudaSuccess) err = drain(s);
  return err;
}

/// Synchronous calls wait for the legacy stream and every blocking stream (not for streams created
/// with cudaStreamNonBlocking, as on the device).
cudaError_t drain_blocking() {
  Device& d = dev();
  cudaError_t err = drain(&d.legacy);
  for (CUstream_st* s : d.streams)
    if (err == cudaSuccess && !(s->flags & cudaStreamNonBlocking)) err = drain(s);
  return err;
}

cudaError_t check_copy(const void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  if (n == 0) return cudaSuccess;
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return fail(cudaErrorInvalidMemcpyDirection, "invalid copy direction");
  if (!dst || !src) return fail(cudaErrorInvalidValue, "copy of " + std::to_string(n) + " bytes with a null pointer");
  if (dst_dev && !find_range(dst, n))
    return fail(cudaErrorInvalidValue, "copy of " + std::to_string(n) + " bytes to a device range outside every allocation");
  if (src_dev && !find_range(src, n))
    return fail(cudaErrorInvalidValue, "copy of " + std::to_string(n) + " bytes from a device range outside every allocation");
  return cudaSuccess;
}

void count_copy(HostCounters& h, cudaMemcpyKind kind, std::size_t n) {
  if (kind == cudaMemcpyDeviceToHost) {
    ++h.to_host;
    h.to_host_bytes += n;
  } else if (kind == cudaMemcpyHostToDevice) {
    ++h.to_device;
    h.to_device_bytes += n;
  }
}

cudaError_t run_launch(const detail::LaunchJob& job) {
  Device& d = dev();
  ++d.counts[job.name];
  const std::string err = detail::execute_launch(job);
  if (!err.empty()) return fail_sticky(cudaErrorLaunchFailure, err);
  for (const auto& [addr, al] : d.allocations)
    if (!canaries_intact(al)) {
      restore_canaries(al);  // reported once, here
      return fail_sticky(cudaErrorIllegalAddress, "kernel '" + job.name + "' wrote outside a device allocation of " +
                                                      std::to_string(al.size) + " bytes");
    }
  return cudaSuccess;
}

#define CRFX_EMU_ENTER()    \
  Device& d = dev();        \
  Lock lock_(d.mutex);      \
  if (d.sticky != cudaSuccess) return d.sticky

}  // namespace

// ---- controls ------------------------------------------------------------------------------------
void set_memory_budget(std::size_t bytes) {
  Lock l(dev().mutex);
  dev().budget = bytes ? bytes : kTotalBytes;
}
std::size_t memory_budget() { return dev().budget; }
std::size_t memory_in_use() { return dev().used; }
void fail_allocation(std::size_t n) {
  Lock l(dev().mutex);
  dev().fail_countdown = n;
}
void set_schedule_seed(std::uint64_t seed) {
  Lock l(dev().mutex);
  dev().seed = seed;
}
std::uint64_t schedule_seed() { return dev().seed; }
HostCounters host_counters() {
  Lock l(dev().mutex);
  return dev().host;
}
void reset_host_counters() {
  Lock l(dev().mutex);
  dev().host = HostCounters{};
}
std::map<std::string, std::size_t> launch_counts() {
  Lock l(dev().mutex);
  return dev().counts;
}
void reset_launch_counts() {
  Lock l(dev().mutex);
  dev().counts.clear();
}
void clear_sticky_error() {
  Lock l(dev().mutex);
  dev().sticky = cudaSuccess;
  dev().last = cudaSuccess;
}

namespace detail {
cudaError_t enqueue_launch(const char* name, const void* kernel, dim3 grid, dim3 block, std::size_t smem,
                           cudaStream_t stream, std::function<void()> body) {
  CRFX_EMU_ENTER();
  const std::string k = std::string("kernel '") + name + "': ";
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0)
    return fail(cudaErrorInvalidConfiguration, k + "a grid or block dimension is 0");
  if (threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
    return fail(cudaErrorInvalidConfiguration,
                k + std::to_string(threads) + " threads per block (block " + std::to_string(block.x) + "×" +
                    std::to_string(block.y) + "×" + std::to_string(block.z) + "; the limit is 1024, z ≤ 64)");
  if (grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u)
    return fail(cudaErrorInvalidConfiguration, k + "grid " + std::to_string(grid.x) + "×" + std::to_string(grid.y) +
                                                   "×" + std::to_string(grid.z) +
                                                   " (the limits are 2^31 − 1 × 65,535 × 65,535)");
  const auto attr = d.max_dynamic_smem.find(kernel);
  const std::size_t smem_limit = attr == d.max_dynamic_smem.end() ? kSharedDefault : std::size_t(attr->second);
  if (smem > smem_limit)
    return fail(cudaErrorInvalidValue,
                k + std::to_string(smem) + " bytes of dynamic shared memory; the limit is " +
                    std::to_string(smem_limit) +
                    (attr == d.max_dynamic_smem.end() ? " without cudaFuncAttributeMaxDynamicSharedMemorySize" : ""));
  CUstream_st* s = stream_of(stream);
  if (s != &d.legacy && !d.streams.count(s)) return fail(cudaErrorInvalidResourceHandle, k + "unknown stream");
  auto job = std::make_shared<LaunchJob>();
  job->name = name;
  job->grid = grid;
  job->block = block;
  job->smem = smem;
  job->seed = d.seed * 0x9E3779B97F4A7C15ull + ++d.launches;
  ++d.host.launches;
  job->body = std::move(body);
  s->queue.push_back([job] { return run_launch(*job); });
  return cudaSuccess;
}
}  // namespace detail

}  // namespace crfx::emu

using namespace crfx::emu;

// ---- devices and errors ----------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  CRFX_EMU_ENTER();
  if (device != 0) return fail(cudaErrorInvalidDevice, "device " + std::to_string(device) + " does not exist");
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  CRFX_EMU_ENTER();
  if (device != 0) return fail(cudaErrorInvalidDevice, "device " + std::to_string(device) + " does not exist");
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3, emulated on the CPU");
  p->totalGlobalMem = d.budget;
  p->sharedMemPerBlock = kSharedDefault;
  p->sharedMemPerBlockOptin = kSharedOptIn;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  p->maxThreadsPerMultiProcessor = 2048;
  p->l2CacheSize = 50 * 1024 * 1024;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  CRFX_EMU_ENTER();
  ++d.host.syncs;
  return drain_all();
}
cudaError_t cudaDeviceReset() {
  Device& d = dev();
  Lock l(d.mutex);
  d.sticky = d.last = cudaSuccess;
  for (CUstream_st* s : d.streams) s->queue.clear();
  d.legacy.queue.clear();
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  Device& d = dev();
  Lock l(d.mutex);
  const cudaError_t e = d.sticky != cudaSuccess ? d.sticky : d.last;
  d.last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  Device& d = dev();
  Lock l(d.mutex);
  return d.sticky != cudaSuccess ? d.sticky : d.last;
}
const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t err) {
  Device& d = dev();
  Lock l(d.mutex);
  if (err == d.detail_code && !d.detail.empty()) return d.detail.c_str();
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return cudaGetErrorName(err);
  }
}

// ---- memory ------------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  CRFX_EMU_ENTER();
  *p = nullptr;
  if (d.fail_countdown && --d.fail_countdown == 0)
    return fail(cudaErrorMemoryAllocation, "out of memory (allocation of " + std::to_string(bytes) +
                                               " bytes failed on purpose: fail_allocation)");
  if (bytes > d.budget - d.used)
    return fail(cudaErrorMemoryAllocation, "out of memory: " + std::to_string(bytes) + " bytes asked, " +
                                               std::to_string(d.budget - d.used) + " of " +
                                               std::to_string(d.budget) + " free");
  if (bytes == 0) return cudaSuccess;
  auto* raw = static_cast<unsigned char*>(std::malloc(bytes + 2 * kCanaryBytes));
  if (!raw) return fail(cudaErrorMemoryAllocation, "out of host memory for " + std::to_string(bytes) + " bytes");
  std::memset(raw, kCanary, kCanaryBytes);
  std::memset(raw + kCanaryBytes + bytes, kCanary, kCanaryBytes);
  // Uninitialised device memory reads as a signalling NaN (doubles) / 0xA5A5A5A5 (32-bit words).
  static const unsigned char pattern[8] = {0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xF4, 0x7F};
  for (std::size_t i = 0; i < bytes; ++i) raw[kCanaryBytes + i] = pattern[i & 7];
#ifdef CRFX_EMU_ASAN
  ASAN_POISON_MEMORY_REGION(raw, kCanaryBytes);
  ASAN_POISON_MEMORY_REGION(raw + kCanaryBytes + bytes, kCanaryBytes);
#endif
  *p = raw + kCanaryBytes;
  d.allocations[std::uintptr_t(*p)] = {raw, bytes};
  d.used += bytes;
  ++d.host.allocations;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  CRFX_EMU_ENTER();
  if (!p) return cudaSuccess;
  const cudaError_t err = drain_all();  // cudaFree synchronises the device
  if (err != cudaSuccess) return err;
  auto it = d.allocations.find(std::uintptr_t(p));
  if (it == d.allocations.end()) return fail(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
  const Allocation al = it->second;
  d.allocations.erase(it);
  d.used -= al.size;
  const bool intact = canaries_intact(al);
#ifdef CRFX_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(al.raw, al.size + 2 * kCanaryBytes);
#endif
  std::free(al.raw);
  if (!intact)
    return fail_sticky(cudaErrorIllegalAddress,
                       "a device allocation of " + std::to_string(al.size) + " bytes was written outside its bounds");
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  *p = std::malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation, "out of pinned host memory");
}
cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned) { return cudaMallocHost(p, bytes); }
cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  CRFX_EMU_ENTER();
  *free_bytes = d.budget - d.used;
  *total_bytes = d.budget;
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  CRFX_EMU_ENTER();
  if (const cudaError_t e = check_copy(dst, src, n, kind)) return e;
  ++d.host.syncs;
  count_copy(d.host, kind, n);
  if (const cudaError_t e = drain_blocking()) return e;
  if (n) std::memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind, cudaStream_t stream) {
  CRFX_EMU_ENTER();
  if (const cudaError_t e = check_copy(dst, src, n, kind)) return e;
  count_copy(d.host, kind, n);
  if (n) stream_of(stream)->queue.push_back([=] {
      std::memmove(dst, src, n);
      return cudaSuccess;
    });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, std::size_t n) {
  CRFX_EMU_ENTER();
  if (n && !find_range(p, n)) return fail(cudaErrorInvalidValue, "memset of a range outside every allocation");
  ++d.host.syncs;
  if (const cudaError_t e = drain_blocking()) return e;
  if (n) std::memset(p, value, n);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t n, cudaStream_t stream) {
  CRFX_EMU_ENTER();
  if (n && !find_range(p, n)) return fail(cudaErrorInvalidValue, "memset of a range outside every allocation");
  if (n) stream_of(stream)->queue.push_back([=] {
      std::memset(p, value, n);
      return cudaSuccess;
    });
  return cudaSuccess;
}

// ---- streams and events ------------------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  CRFX_EMU_ENTER();
  auto* st = new CUstream_st;
  st->flags = flags;
  d.streams.insert(st);
  *s = st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  Device& d = dev();
  Lock l(d.mutex);
  if (!s || !d.streams.count(s)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of an unknown stream");
  const cudaError_t err = d.sticky == cudaSuccess ? drain(s) : d.sticky;  // pending work completes first
  d.streams.erase(s);
  delete s;
  return err;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  CRFX_EMU_ENTER();
  CUstream_st* st = stream_of(s);
  if (st != &d.legacy && !d.streams.count(st)) return fail(cudaErrorInvalidResourceHandle, "unknown stream");
  ++d.host.syncs;
  return st == &d.legacy ? drain_blocking() : drain(st);
}
cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  CRFX_EMU_ENTER();
  const std::uint64_t number = ++d.event_records;
  e->stream = stream_of(s);
  e->record = number;
  stream_of(s)->queue.push_back([e, number] {
    e->time = std::chrono::steady_clock::now();
    e->recorded = true;
    e->reached = std::max(e->reached, number);
    return cudaSuccess;
  });
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  CRFX_EMU_ENTER();
  if (!e) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent on a null event");
  CUstream_st* const waiter = stream_of(s);
  CUstream_st* const src = e->stream;
  const std::uint64_t number = e->record;
  if (!src || src == waiter) return cudaSuccess;  // never recorded, or already in stream order
  // When the waiting stream reaches this point, the recording stream's work up to that record
  // runs first (the emulation's streams run at synchronisation points, in order: this is the
  // edge between the two queues).
  waiter->queue.push_back([e, src, number] {
    Device& dd = dev();
    if (src != &dd.legacy && !dd.streams.count(src)) return cudaSuccess;  // destroyed: its work ran
    while (e->reached < number && !src->queue.empty() && dd.sticky == cudaSuccess) {
      auto op = std::move(src->queue.front());
      src->queue.pop_front();
      if (const cudaError_t err = op(); err != cudaSuccess) return err;
    }
    if (dd.sticky != cudaSuccess) return dd.sticky;
    if (e->reached < number)
      return fail_sticky(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: the event's record never ran");
    return cudaSuccess;
  });
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  CRFX_EMU_ENTER();
  ++d.host.syncs;
  return drain_all();
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start->recorded || !end->recorded) return fail(cudaErrorNotReady, "event not recorded");
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttributeImpl(const void* func, cudaFuncAttribute attr, int value) {
  CRFX_EMU_ENTER();
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || std::size_t(value) > kSharedOptIn)
      return fail(cudaErrorInvalidValue, "cudaFuncAttributeMaxDynamicSharedMemorySize " + std::to_string(value) +
                                             " exceeds the H100's " + std::to_string(kSharedOptIn) + " bytes");
    d.max_dynamic_smem[func] = value;
  }
  return cudaSuccess;
}
