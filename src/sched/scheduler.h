// The vLLM-v1 scheduler: each step hands out new tokens per request so that num_computed_tokens
// catches up with prompt + output, under a token budget and a sequence cap. Running requests go
// first, then waiting ones (FCFS or priority); long prompts are chunked; prefix-cache hits skip
// computed tokens; when KV blocks run out the lowest-priority / latest running request is
// preempted by recompute. Single-threaded: only the engine thread calls it.
#pragma once

#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/request_queue.h"
#include "sched/scheduler_config.h"
#include "sched/scheduler_output.h"

namespace locus {

class Scheduler {
 public:
  // Fails when the config is inconsistent or the KV pool cannot hold one max_model_len sequence
  // (then some request could never run).
  static Expected<std::unique_ptr<Scheduler>> create(const SchedulerConfig& config,
                                                     const KVCacheConfig& kv_config);

  // Queues a request. Fails (and queues nothing) on a duplicate id, an empty prompt, a prompt
  // that does not fit max_model_len or invalid sampling params.
  Status add_request(EngineCoreRequest request);

  // Ends requests now with a finished status (abort from a client, or a stop string seen by the
  // output processor): they leave the queues and their blocks are freed. Unknown or finished
  // ids are ignored. Never call it between schedule() and update_from_output() of one step.
  void finish_requests(std::span<const RequestId> request_ids, RequestStatus status);

  // Plans one step into `out` (cleared first; its capacity is reused, so a steady stream of
  // steps allocates nothing). Its spans and Request pointers stay valid until the matching
  // update_from_output().
  void schedule(SchedulerOutput& out);
  SchedulerOutput schedule();

  // Appends sampled tokens, applies token-level stop conditions, frees finished requests.
  // Fills `outputs` with one entry per request that has news (tokens or prompt logprobs),
  // reusing the entries already there.
  Status update_from_output(const SchedulerOutput& scheduled, const ModelRunnerOutput& output,
                            std::vector<EngineCoreOutput>& outputs);
  Expected<std::vector<EngineCoreOutput>> update_from_output(const SchedulerOutput& scheduled,
                                                             const ModelRunnerOutput& output);

  bool has_unfinished_requests() const { return !running_.empty() || !waiting_.empty(); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }
  const KVCacheManager& kv_cache_manager() const { return kv_; }
  const Request* find_request(RequestId id) const;

  // KV invariants plus: running requests hold blocks covering their computed tokens, waiting
  // ones hold none. For tests.
  Status check_invariants() const;

 private:
  Scheduler(const SchedulerConfig& config, const KVCacheConfig& kv_config);

  struct Planned {
    Request* request;
    int num_computed_before;
    int num_new_tokens;
    bool is_new;
    const std::vector<BlockId>* blocks;
  };

  // Picks and removes the running request to preempt; fixes up the step planned so far when
  // the victim was already scheduled in it.
  Request* pick_victim(size_t* current_index, int* token_budget);
  void preempt(Request* request, SchedulerOutput& out);
  int lookahead_for(int num_computed, int num_new) const;

  SchedulerConfig config_;
  KVCacheManager kv_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<Request*> running_;  // in admission order: the FCFS victim is the back
  RequestQueue waiting_;
  std::vector<RequestId> finished_since_schedule_;
  std::vector<Planned> planned_;  // scratch reused across steps
  uint64_t num_preemptions_ = 0;
};

}  // namespace locus
