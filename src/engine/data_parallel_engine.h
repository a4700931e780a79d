// Data parallelism: N engine replicas (each its own scheduler, KV cache and model runner, each
// maybe tensor-parallel) behind one EngineClient. A request goes to the replica the balancer
// picks (dp_balancer.h: the likely holder of its cached prefix, else the least loaded); its id
// names the replica, so aborts find it. The server, `locus generate` and the benchmarks see
// one engine.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "engine/dp_balancer.h"
#include "engine/llm_engine.h"

namespace locus {

class DataParallelEngine final : public EngineClient {
 public:
  // Each replica's ids start at r * kIdSpan + 1: replica r must have been created with
  // EngineConfig::first_request_id = first_request_id(r).
  static constexpr uint64_t kIdSpan = 1ull << 48;
  static uint64_t first_request_id(int replica) {
    return static_cast<uint64_t>(replica) * kIdSpan + 1;
  }

  static Expected<std::unique_ptr<DataParallelEngine>> create(
      std::vector<std::unique_ptr<LLMEngine>> replicas, int block_size, int64_t blocks_per_replica,
      BalancerOptions options = {});
  ~DataParallelEngine() override { shutdown(); }

  using EngineClient::add_request;
  Expected<std::shared_ptr<RequestStream>> add_request(std::vector<int32_t> prompt_token_ids,
                                                       SamplingParams params,
                                                       RequestOptions options) override;
  void abort(RequestId request_id) override;
  // Sums over the replicas (KV usage: their mean).
  EngineStats stats() const override;
  Status health() override;
  int num_unfinished_requests() override;
  int vocab_size() const override { return replicas_.front()->vocab_size(); }
  const EngineConfig& config() const override { return replicas_.front()->config(); }
  void shutdown() override;

  int size() const { return static_cast<int>(replicas_.size()); }
  LLMEngine& replica(int r) { return *replicas_[static_cast<size_t>(r)]; }

 private:
  DataParallelEngine(std::vector<std::unique_ptr<LLMEngine>> replicas, PrefixAwareBalancer balancer)
      : replicas_(std::move(replicas)), balancer_(std::move(balancer)) {}

  std::vector<std::unique_ptr<LLMEngine>> replicas_;
  std::mutex mutex_;  // the balancer's records
  PrefixAwareBalancer balancer_;
};

}  // namespace locus
