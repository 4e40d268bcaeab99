#include "util/thread_pool.hpp"

#include <string>
#include <system_error>

#include "crfx/errors.hpp"

#include <algorithm>

namespace crfx {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(threads);
  for (unsigned w = 1; w < threads; ++w) {
    try {
      workers_.emplace_back([this, w] { work(w); });
    } catch (const std::system_error& e) {  // a process or memory limit: stop the ones started
      stop_workers();
      throw Error("cannot start worker thread " + std::to_string(w + 1) + " of " + std::to_string(threads) +
                  " (" + e.what() + "); --threads " + std::to_string(w) + " or fewer may work here");
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
}

void ThreadPool::drain(unsigned worker) {
  for (;;) {
    std::size_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_) return;
    try {
      (*fn_)(task, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_.store(n_, std::memory_order_relaxed);  // stop handing out tasks
    }
  }
}

void ThreadPool::work(unsigned worker) {
  unsigned long seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain(worker);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_all();
    }
  }
}

void ThreadPool::run(std::size_t n, const TaskFn& fn) {
  if (n == 0) return;
  if (workers_.empty() || n == 1) {
    for (std::size_t t = 0; t < n; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    next_.store(0, std::memory_order_relaxed);
    busy_ = static_cast<unsigned>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace crfx
