// crfx — device memory as the CUDA backend's host code sees it: the move-only owner
// DeviceBuffer<T>, uploads of host vectors, grow-only scratch buffers, and the small sizing
// helpers (grid_for, mib / fmt_mib for the out-of-memory messages).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_check.cuh"

namespace crfx::cuda::detail {

/// Move-only owner of a device array of T. resize() discards the contents.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) {
    o.p_ = nullptr;
    o.n_ = o.cap_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = o.p_;
      n_ = o.n_;
      cap_ = o.cap_;
      o.p_ = nullptr;
      o.n_ = o.cap_ = 0;
    }
    return *this;
  }
  /// New contents, uninitialised (the old are freed first). On failure the buffer is empty.
  void resize(std::size_t n) {
    if (n == n_ && n == cap_) return;
    release();
    T* p = nullptr;
    if (n) CRFX_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)));
    p_ = p;
    n_ = cap_ = n;
  }
  /// n elements, uninitialised, in the array held when it has room (no allocation), else as
  /// resize(n): a buffer reused for arrays of several sizes allocates only to grow.
  void fit(std::size_t n) {
    if (n <= cap_) {
      n_ = n;
    } else {
      resize(n);
    }
  }
  void clear() noexcept { release(); }
  T* get() const { return n_ ? p_ : nullptr; }  // null when empty (a fitted buffer keeps its array)
  std::size_t size() const { return n_; }
  std::size_t capacity() const { return cap_; }

 private:
  void release() noexcept {
    if (p_) cudaFree(p_);  // no throw from a destructor; a failed free leaks nothing we can fix
    p_ = nullptr;
    n_ = cap_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0, cap_ = 0;
};

/// Move-only owner of a pinned (page-locked) host array of T (cudaMallocHost): what a copy
/// stream reads asynchronously while the compute stream runs. Contents uninitialised.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  /// New contents (the old are freed first). On failure the buffer is empty.
  void resize(std::size_t n) {
    if (n == n_) return;
    release();
    T* p = nullptr;
    if (n) CRFX_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p), n * sizeof(T)));
    p_ = p;
    n_ = n;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  void release() noexcept {
    if (p_) cudaFreeHost(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T>
void upload_vector(DeviceBuffer<T>& d, const std::vector<T>& h, cudaStream_t s) {
  d.resize(h.size());
  if (!h.empty())
    CRFX_CUDA_CHECK(cudaMemcpyAsync(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}

/// upload_vector into what `d` holds when it has room (DeviceBuffer::fit).
template <class T>
void upload_fitted(DeviceBuffer<T>& d, const std::vector<T>& h, cudaStream_t s) {
  d.fit(h.size());
  if (!h.empty())
    CRFX_CUDA_CHECK(cudaMemcpyAsync(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}

/// Grows a scratch buffer (never shrinks; the contents are not kept).
template <class T>
void reserve_device(DeviceBuffer<T>& b, std::size_t n) {
  if (b.size() < n) b.resize(std::max(n, 2 * b.size()));
}

inline unsigned grid_for(std::size_t n, int threads, std::size_t max_blocks = 65535u * 32) {
  return unsigned(std::max<std::size_t>(1, std::min<std::size_t>((n + threads - 1) / threads, max_blocks)));
}

inline double mib(std::size_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

inline std::string fmt_mib(std::size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", mib(bytes));
  return buf;
}

}  // namespace crfx::cuda::detail
