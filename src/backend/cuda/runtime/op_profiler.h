// Per-op GPU time (LOCUS_CUDA_OP_PROFILE=1): events around every op on the compute stream (and
// around each CUDA graph replay), summed per op label, so a decode step's time can be split into
// its kernels without an external profiler. A short GPU sleep before each start event keeps the
// host's launch latency out of the interval; the run is slower, the per-op times are not.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace locus::cuda {

class OpProfiler {
 public:
  explicit OpProfiler(cudaStream_t stream) : stream_(stream) {}
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  ~OpProfiler();

  struct Pending {
    std::string label;
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
    bool ended = false;
  };

  class Scope {
   public:
    Scope() = default;
    Scope(OpProfiler* p, std::string label);
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope();

   private:
    OpProfiler* profiler_ = nullptr;
    Pending* pending_ = nullptr;
  };

  // Resolves finished events into the totals (call at synchronization points). Scopes still
  // open (an op that synchronizes inside itself) stay pending until a later call.
  void collect();
  std::string report();
  void clear() { totals_.clear(); }

 private:
  struct Total {
    long count = 0;
    double ms = 0;
  };
  cudaEvent_t take_event();

  cudaStream_t stream_;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<cudaEvent_t> free_events_;
  std::map<std::string, Total> totals_;
};

}  // namespace locus::cuda
