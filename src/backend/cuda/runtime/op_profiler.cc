#include "backend/cuda/runtime/op_profiler.h"

#include "backend/cuda/kernels/elementwise/elementwise_launch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

namespace locus::cuda {

OpProfiler::~OpProfiler() {
  collect();
  if (!totals_.empty()) std::fprintf(stderr, "%s", report().c_str());
  for (cudaEvent_t e : free_events_)
    cudaEventDestroy(e);
}

cudaEvent_t OpProfiler::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  cudaEventCreate(&e);
  return e;
}

OpProfiler::Scope::Scope(OpProfiler* p, std::string label) : profiler_(p) {
  auto pending = std::make_unique<Pending>();
  pending->label = std::move(label);
  pending->start = p->take_event();
  pending->end = p->take_event();
  // Keep the GPU busy while the host queues the op, so the events time its kernels only.
  launch_gpu_sleep(200000, p->stream_);
  cudaEventRecord(pending->start, p->stream_);
  pending_ = pending.get();
  p->pending_.push_back(std::move(pending));
}

OpProfiler::Scope::~Scope() {
  if (profiler_ == nullptr) return;
  cudaEventRecord(pending_->end, profiler_->stream_);
  pending_->ended = true;
}

void OpProfiler::collect() {
  cudaStreamSynchronize(stream_);
  std::vector<std::unique_ptr<Pending>> open;
  for (auto& p : pending_) {
    if (!p->ended) {
      open.push_back(std::move(p));
      continue;
    }
    float ms = 0;
    if (cudaEventElapsedTime(&ms, p->start, p->end) == cudaSuccess) {
      Total& t = totals_[p->label];
      ++t.count;
      t.ms += ms;
    }
    free_events_.push_back(p->start);
    free_events_.push_back(p->end);
  }
  pending_ = std::move(open);
}

std::string OpProfiler::report() {
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  double all = 0;
  for (auto& [label, t] : rows)
    all += t.ms;
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::string out =
      fmt::format("GPU time per op (LOCUS_CUDA_OP_PROFILE), {:.1f} ms in all:\n", all);
  for (auto& [label, t] : rows) {
    out +=
        fmt::format("  {:<44} {:>8} calls {:>10.2f} ms {:>6.1f}% {:>9.2f} us/call\n", label,
                    t.count, t.ms, 100.0 * t.ms / all, 1e3 * t.ms / static_cast<double>(t.count));
  }
  return out;
}

}  // namespace locus::cuda
