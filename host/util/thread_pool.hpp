// crfx — a fixed pool of worker threads for data-parallel loops.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace crfx {

/// Runs `fn(task, worker)` for every task in [0, n), handing tasks out dynamically to `size()`
/// workers (the calling thread is worker 0). Results must go to per-task slots, so that what a
/// loop computes never depends on the number of threads or on scheduling.
class ThreadPool {
 public:
  using TaskFn = std::function<void(std::size_t task, unsigned worker)>;

  explicit ThreadPool(unsigned threads);  // 0 = hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }
  /// Runs the loop; rethrows the first exception a task threw.
  void run(std::size_t n, const TaskFn& fn);

 private:
  void work(unsigned worker);
  void drain(unsigned worker);
  /// Wakes the workers to stop and joins them (the destructor, and a constructor that fails).
  void stop_workers() noexcept;

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const TaskFn* fn_ = nullptr;
  std::size_t n_ = 0;
  std::atomic<std::size_t> next_{0};
  unsigned busy_ = 0;
  unsigned long generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

/// Fixed block size for reductions over long vectors: partial results per block, combined in
/// block order, make sums independent of the thread count.
inline constexpr std::size_t kReduceBlock = 1 << 15;

/// f(begin, end, worker) over [0, n) in blocks of `block` on the pool; one call f(0, n, 0) on this
/// thread where n ≤ block or there is no pool. The blocks write disjoint results (or partial ones
/// the caller combines in block order), so nothing depends on the number of threads.
template <class F>
void run_blocks(ThreadPool* pool, std::size_t n, std::size_t block, F&& f) {
  if (!pool || n <= block) {
    if (n) f(std::size_t(0), n, 0u);
    return;
  }
  const std::size_t nb = (n + block - 1) / block;
  pool->run(nb, [&](std::size_t b, unsigned worker) { f(b * block, std::min(n, (b + 1) * block), worker); });
}

}  // namespace crfx
