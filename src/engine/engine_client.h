// What the server, `locus generate` and the benchmarks drive: one LLMEngine, or data-parallel
// replicas behind a balancer (DataParallelEngine). Every method is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine_config.h"
#include "engine/request_output.h"
#include "engine/request_stream.h"
#include "sched/scheduler_output.h"

namespace locus {

struct RequestOptions {
  int priority = 0;        // lower runs first under the priority policy
  std::string cache_salt;  // requests share cached prefixes only with equal salts
};

struct EngineStats {
  SchedulerStats scheduler;
  uint64_t num_steps = 0;
  uint64_t num_generated_tokens = 0;
};

class EngineClient {
 public:
  virtual ~EngineClient() = default;

  // Validates at once (a bad request is an error here, never a failed stream), then queues
  // the request; n > 1 runs as n sequences that share the prompt's cached prefix. Child i gets
  // seed + i when a seed is given (vLLM).
  virtual Expected<std::shared_ptr<RequestStream>> add_request(
      std::vector<int32_t> prompt_token_ids, SamplingParams params, RequestOptions options) = 0;
  Expected<std::shared_ptr<RequestStream>> add_request(std::vector<int32_t> prompt_token_ids,
                                                       SamplingParams params) {
    return add_request(std::move(prompt_token_ids), std::move(params), RequestOptions{});
  }

  // Cancels a request: its stream gets a final delta with finish_reason abort at once, and the
  // engine frees its blocks before the next step. Unknown or finished ids are ignored.
  virtual void abort(RequestId request_id) = 0;

  // Runs prompts to completion (the offline path of `locus generate`).
  Expected<std::vector<RequestResult>> generate(const std::vector<std::vector<int32_t>>& prompts,
                                                const SamplingParams& params);

  virtual EngineStats stats() const = 0;
  // ok while the engine runs; the error that killed it (or "shutting down") afterwards.
  virtual Status health() = 0;
  // Requests added and not yet finished (waiting, running or draining to their streams).
  virtual int num_unfinished_requests() = 0;
  virtual int vocab_size() const = 0;
  virtual const EngineConfig& config() const = 0;

  // Stops the engine; streams still open get a resource_exhausted "shutting down" error.
  // Idempotent.
  virtual void shutdown() = 0;
};

}  // namespace locus
