// LLMEngine: request queue in, engine thread, output thread, per-request streams out.
#include "engine/llm_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/logging.h"
#include "kv/block_hash.h"

namespace locus {

double LLMEngine::now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

Expected<std::unique_ptr<LLMEngine>> LLMEngine::create(const EngineConfig& config,
                                                       std::unique_ptr<ModelRunner> runner,
                                                       DetokenizerFactory detokenizer_factory) {
  LOCUS_ASSIGN_OR_RETURN(auto core, EngineCore::create(config, std::move(runner)));
  if (core->async_scheduling()) {
    log::info("async scheduling: decode steps are queued on the device ahead of their tokens");
  } else if (config.async_scheduling.value_or(false)) {
    log::warn(
        "--async-scheduling has no effect: this model runner runs its steps in turn "
        "(tensor-parallel, data-parallel with shared experts and multi-node runs do)");
  }
  return std::unique_ptr<LLMEngine>(
      new LLMEngine(config, std::move(core), std::move(detokenizer_factory)));
}

LLMEngine::LLMEngine(const EngineConfig& config, std::unique_ptr<EngineCore> core,
                     DetokenizerFactory detokenizer_factory)
    : config_(config),
      vocab_size_(core->model_runner().vocab_size()),
      core_(std::move(core)),
      next_request_id_(std::max<uint64_t>(config.first_request_id, 1)),
      processor_(std::move(detokenizer_factory)) {
  engine_thread_ = std::thread([this] { engine_loop(); });
  output_thread_ = std::thread([this] { output_loop(); });
}

LLMEngine::~LLMEngine() {
  shutdown();
}

void LLMEngine::shutdown() {
  std::lock_guard guard(shutdown_mutex_);
  if (!engine_thread_.joinable()) return;
  {
    std::lock_guard lock(input_mutex_);
    stop_engine_ = true;
  }
  input_cv_.notify_all();
  engine_thread_.join();
  {
    std::lock_guard lock(event_mutex_);
    stop_output_ = true;
  }
  event_cv_.notify_all();
  output_thread_.join();
  fail_all(resource_exhausted("the engine is shutting down"));
}

Expected<std::shared_ptr<RequestStream>> LLMEngine::add_request(
    std::vector<int32_t> prompt_token_ids, SamplingParams params, RequestOptions options) {
  // Validate here so that the caller (an HTTP handler) gets the error synchronously.
  LOCUS_RETURN_IF_ERROR(params.validate_for_model(vocab_size_, config_.max_logprobs));
  const auto prompt_len = static_cast<int>(prompt_token_ids.size());
  if (prompt_len == 0) return invalid_argument("The decoder prompt cannot be empty");
  if (prompt_len >= config_.scheduler.max_model_len) {
    return invalid_argument(
        fmt::format("The decoder prompt (length {}) is longer than the maximum model length of {}.",
                    prompt_len, config_.scheduler.max_model_len));
  }
  for (int32_t t : prompt_token_ids) {
    if (t < 0 || t >= vocab_size_) {
      return invalid_argument(
          fmt::format("prompt token id {} is outside the vocabulary (size {})", t, vocab_size_));
    }
  }

  const int n = params.n;
  // One id for the request; with n > 1 the sequences get the next n ids.
  const RequestId id = next_request_id_.fetch_add(n == 1 ? 1 : static_cast<uint64_t>(n) + 1);
  const double arrival = now();
  std::vector<RequestId> child_ids;
  std::vector<Command> commands;
  for (int i = 0; i < n; ++i) {
    const RequestId child = n == 1 ? id : id + 1 + static_cast<uint64_t>(i);
    child_ids.push_back(child);
    Command c;
    c.kind = Command::Kind::kAdd;
    c.request.request_id = child;
    c.request.prompt_token_ids = prompt_token_ids;
    c.request.params = params;
    c.request.params.n = 1;
    if (params.seed) c.request.params.seed = *params.seed + static_cast<uint64_t>(i);
    // Prompt logprobs are the same for every completion: compute them once.
    if (i > 0) c.request.params.prompt_logprobs.reset();
    c.request.priority = options.priority;
    c.request.arrival_time = arrival;
    c.request.cache_salt_key = cache_salt_key(options.cache_salt);
    commands.push_back(std::move(c));
  }

  auto stream = std::make_shared<RequestStream>(id);
  {
    std::lock_guard lock(processor_mutex_);
    if (!dead_.is_ok()) return dead_;
    // Registered before the engine can produce anything for it.
    processor_.add_request(id, child_ids, prompt_token_ids, params, arrival);
    streams_.emplace(id, stream);
  }
  send_commands(std::move(commands));
  return stream;
}

void LLMEngine::abort(RequestId request_id) {
  OutputProcessor::Result result;
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard lock(processor_mutex_);
    result = processor_.abort(request_id, now());
    auto it = streams_.find(request_id);
    if (it != streams_.end()) {
      stream = std::move(it->second);
      streams_.erase(it);
    }
  }
  if (stream) {
    for (RequestOutput& o : result.outputs)
      stream->push(std::move(o));
  }
  if (!result.aborted_in_engine.empty()) {
    Command c;
    c.kind = Command::Kind::kAbort;
    c.ids = std::move(result.aborted_in_engine);
    std::vector<Command> commands;
    commands.push_back(std::move(c));
    send_commands(std::move(commands));
  }
}

Status LLMEngine::health() {
  std::lock_guard lock(processor_mutex_);
  return dead_;
}

int LLMEngine::num_unfinished_requests() {
  std::lock_guard lock(processor_mutex_);
  return static_cast<int>(streams_.size());
}

EngineStats LLMEngine::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void LLMEngine::send_commands(std::vector<Command> commands) {
  {
    std::lock_guard lock(input_mutex_);
    for (Command& c : commands)
      input_.push_back(std::move(c));
  }
  input_cv_.notify_one();
}

void LLMEngine::post_event(StepEvent event) {
  {
    std::lock_guard lock(event_mutex_);
    events_.push_back(std::move(event));
  }
  event_cv_.notify_one();
}

std::vector<EngineCoreOutput> LLMEngine::take_spare_outputs() {
  std::lock_guard lock(event_mutex_);
  if (spare_outputs_.empty()) return {};
  std::vector<EngineCoreOutput> v = std::move(spare_outputs_.back());
  spare_outputs_.pop_back();
  return v;
}

void LLMEngine::engine_loop() {
  bool has_work = false;
  std::vector<Command> commands;
  std::vector<EngineCoreOutput> outputs;
  while (true) {
    {
      std::unique_lock lock(input_mutex_);
      input_cv_.wait(lock, [&] { return stop_engine_ || !input_.empty() || has_work; });
      if (stop_engine_) return;
      commands.swap(input_);
    }
    // Aborts and adds land between steps, never between schedule() and update.
    for (Command& c : commands) {
      switch (c.kind) {
        case Command::Kind::kAdd: {
          const RequestId id = c.request.request_id;
          Status s = core_->add_request(std::move(c.request));
          if (!s.is_ok()) post_event({{}, s, id});
          break;
        }
        case Command::Kind::kAbort:
          core_->abort_requests(c.ids);
          break;
        case Command::Kind::kFinishStop:
          core_->finish_requests(c.ids, FinishReason::kStop);
          break;
      }
    }
    commands.clear();
    if (core_->has_unfinished_requests()) {
      Status status = core_->step(outputs);
      if (!status.is_ok()) {
        log::error("engine step failed: {}", status.to_string());
        post_event({{}, status, 0});
        return;  // the engine is unusable; the output thread fails every stream
      }
      uint64_t tokens = 0;
      for (const EngineCoreOutput& o : outputs)
        tokens += o.new_token_ids.size();
      {
        std::lock_guard lock(stats_mutex_);
        stats_.scheduler = core_->stats();
        ++stats_.num_steps;
        stats_.num_generated_tokens += tokens;
      }
      if (!outputs.empty()) {
        post_event({std::move(outputs), Status::ok(), 0});
        outputs = take_spare_outputs();
      }
    } else {
      std::lock_guard lock(stats_mutex_);
      stats_.scheduler = core_->stats();
    }
    has_work = core_->has_unfinished_requests();
  }
}

void LLMEngine::deliver(
    std::vector<RequestOutput>& outputs,
    std::vector<std::pair<std::shared_ptr<RequestStream>, RequestOutput>>& routed) {
  // Called with processor_mutex_ held: resolve streams, drop finished ones from the map.
  for (RequestOutput& o : outputs) {
    auto it = streams_.find(o.request_id);
    if (it == streams_.end()) continue;
    std::shared_ptr<RequestStream> stream = it->second;
    if (o.request_finished) streams_.erase(it);
    routed.emplace_back(std::move(stream), std::move(o));
  }
}

void LLMEngine::output_loop() {
  while (true) {
    StepEvent event;
    {
      std::unique_lock lock(event_mutex_);
      event_cv_.wait(lock, [&] { return stop_output_ || !events_.empty(); });
      if (events_.empty()) return;  // stop requested and nothing left
      event = std::move(events_.front());
      events_.pop_front();
    }
    if (!event.error.is_ok() && event.rejected_child == 0) {
      fail_all(event.error);
      continue;
    }
    std::vector<std::pair<std::shared_ptr<RequestStream>, RequestOutput>> routed;
    std::shared_ptr<RequestStream> rejected;
    OutputProcessor::Result result;
    {
      std::lock_guard lock(processor_mutex_);
      if (event.rejected_child != 0) {
        // The engine refused a sequence after admission checks passed (should not happen):
        // fail the whole request and drop its other sequences.
        const RequestId parent = processor_.parent_of(event.rejected_child);
        result = processor_.abort(parent, now());
        auto it = streams_.find(parent);
        if (it != streams_.end()) {
          rejected = std::move(it->second);
          streams_.erase(it);
        }
      } else {
        result = processor_.process(event.outputs, now());
        deliver(result.outputs, routed);
      }
    }
    {
      std::lock_guard lock(event_mutex_);
      if (spare_outputs_.size() < 4) spare_outputs_.push_back(std::move(event.outputs));
    }
    if (rejected) rejected->fail(event.error);
    for (auto& [stream, output] : routed)
      stream->push(std::move(output));
    std::vector<Command> commands;
    if (!result.finished_in_engine.empty()) {
      Command c;
      c.kind = Command::Kind::kFinishStop;
      c.ids = std::move(result.finished_in_engine);
      commands.push_back(std::move(c));
    }
    if (!result.aborted_in_engine.empty()) {
      Command c;
      c.kind = Command::Kind::kAbort;
      c.ids = std::move(result.aborted_in_engine);
      commands.push_back(std::move(c));
    }
    if (!commands.empty()) send_commands(std::move(commands));
  }
}

void LLMEngine::fail_all(const Status& status) {
  std::unordered_map<RequestId, std::shared_ptr<RequestStream>> streams;
  {
    std::lock_guard lock(processor_mutex_);
    if (dead_.is_ok()) dead_ = status;
    streams.swap(streams_);
    processor_.clear();
  }
  for (auto& entry : streams)
    entry.second->fail(status);
}

}  // namespace locus
