#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace locus::cpu {
namespace {

thread_local bool t_inside_task = false;

// Chunk c of `chunks` over [0, n): sizes differ by at most one.
void chunk_range(int64_t n, int chunks, int c, int64_t& begin, int64_t& end) {
  begin = n * c / chunks;
  end = n * (c + 1) / chunks;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i)
    workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& w : workers_)
    w.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads(), by_size));
  if (chunks <= 1 || t_inside_task) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &fn;
    task_size_ = n;
    task_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  // The caller takes chunk 0.
  int64_t begin = 0;
  int64_t end = 0;
  chunk_range(n, chunks, 0, begin, end);
  t_inside_task = true;
  fn(begin, end);
  t_inside_task = false;
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  t_inside_task = true;  // workers never start nested parallel work
  while (true) {
    const std::function<void(int64_t, int64_t)>* task = nullptr;
    int64_t n = 0;
    int chunks = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
      n = task_size_;
      chunks = task_chunks_;
    }
    if (index < chunks) {
      int64_t begin = 0;
      int64_t end = 0;
      chunk_range(n, chunks, index, begin, end);
      (*task)(begin, end);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace locus::cpu
