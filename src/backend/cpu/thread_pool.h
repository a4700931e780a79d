// A small fixed pool of worker threads for the CPU reference kernels. parallel_for splits a
// range into contiguous chunks, one per thread, so every output element is computed by exactly
// one thread in the same order as a serial loop: results never depend on the thread count.
// One caller at a time (the backend is driven by a single thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace locus::cpu {

class ThreadPool {
 public:
  // num_threads <= 1 runs everything on the caller's thread.
  explicit ThreadPool(int num_threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n) and returns when all are done.
  // Chunks smaller than `min_chunk` are not split further. A call from inside a task runs
  // serially (no nested parallelism, no deadlock).
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t)>* task_ = nullptr;
  int64_t task_size_ = 0;
  int task_chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace locus::cpu
