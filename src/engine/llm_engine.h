// The in-process API the server (#6), `locus generate` and the benchmarks use. add_request()
// returns a stream of deltas; abort() cancels. Inside: an engine thread that owns the
// EngineCore (scheduler, KV manager, model runner, sampler) and an output thread that runs the
// OutputProcessor (detokenization, stop strings). Every public method is thread-safe.
// See src/engine/README.md for the threading and ownership contract.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/detokenizer.h"
#include "engine/engine_client.h"
#include "engine/engine_core.h"
#include "engine/output_processor.h"
#include "engine/request_stream.h"

namespace locus {

class LLMEngine final : public EngineClient {
 public:
  // Builds the EngineCore (sizing the KV cache) and starts both threads.
  static Expected<std::unique_ptr<LLMEngine>> create(const EngineConfig& config,
                                                     std::unique_ptr<ModelRunner> runner,
                                                     DetokenizerFactory detokenizer_factory = {});
  ~LLMEngine() override;  // shutdown()
  LLMEngine(const LLMEngine&) = delete;
  LLMEngine& operator=(const LLMEngine&) = delete;

  // EngineClient (see engine_client.h for the contracts).
  using EngineClient::add_request;
  Expected<std::shared_ptr<RequestStream>> add_request(std::vector<int32_t> prompt_token_ids,
                                                       SamplingParams params,
                                                       RequestOptions options) override;
  void abort(RequestId request_id) override;
  EngineStats stats() const override;
  Status health() override;
  int num_unfinished_requests() override;
  int vocab_size() const override { return vocab_size_; }
  const EngineConfig& config() const override { return config_; }
  // Stops both threads.
  void shutdown() override;

  // Seconds on the steady clock used for request metrics.
  static double now();

 private:
  LLMEngine(const EngineConfig& config, std::unique_ptr<EngineCore> core,
            DetokenizerFactory detokenizer_factory);

  struct Command {
    enum class Kind : uint8_t { kAdd, kAbort, kFinishStop } kind = Kind::kAdd;
    EngineCoreRequest request;   // kAdd
    std::vector<RequestId> ids;  // kAbort, kFinishStop
  };
  struct StepEvent {
    std::vector<EngineCoreOutput> outputs;
    Status error;                  // the engine died
    RequestId rejected_child = 0;  // add_request failed on the engine thread
  };

  void engine_loop();
  void output_loop();
  void send_commands(std::vector<Command> commands);
  void post_event(StepEvent event);
  std::vector<EngineCoreOutput> take_spare_outputs();
  // Delivers outputs to their streams; call without holding processor_mutex_.
  void deliver(std::vector<RequestOutput>& outputs,
               std::vector<std::pair<std::shared_ptr<RequestStream>, RequestOutput>>& routed);
  void fail_all(const Status& status);

  const EngineConfig config_;
  const int vocab_size_;
  std::unique_ptr<EngineCore> core_;  // engine thread only (after construction)
  std::atomic<uint64_t> next_request_id_{1};

  // Caller threads -> engine thread.
  std::mutex input_mutex_;
  std::condition_variable input_cv_;
  std::vector<Command> input_;
  bool stop_engine_ = false;

  // Engine thread -> output thread.
  std::mutex event_mutex_;
  std::condition_variable event_cv_;
  std::deque<StepEvent> events_;
  bool stop_output_ = false;
  // Output vectors handed back by the output thread for the engine thread to refill: entries
  // keep their token vectors' capacity, so steady-state steps do not allocate (glibc would
  // otherwise trim and re-fault the heap every step; measured 110 us at 1024 requests).
  std::vector<std::vector<EngineCoreOutput>> spare_outputs_;

  // Output processor and streams: caller threads (add, abort) and the output thread.
  std::mutex processor_mutex_;
  OutputProcessor processor_;
  std::unordered_map<RequestId, std::shared_ptr<RequestStream>> streams_;
  Status dead_;  // set once the engine failed or shut down: new requests are refused

  mutable std::mutex stats_mutex_;
  EngineStats stats_;

  std::mutex shutdown_mutex_;
  std::thread engine_thread_;
  std::thread output_thread_;
};

}  // namespace locus
