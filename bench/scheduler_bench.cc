// One scheduler step (schedule + update_from_output) with N running decode requests: the host
// cost the engine pays per step on top of the GPU forward. Target: < 200 us at N = 1024 on the
// 2-core CI machine (a batch-1024 decode step on an H200 takes several milliseconds).
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "sched/scheduler.h"

namespace locus {
namespace {

constexpr int kPromptLen = 128;
constexpr int kBlockSize = 16;
constexpr int kMaxSteps = 2000;  // fixed iteration count: requests grow one token per step

std::unique_ptr<Scheduler> make_running_scheduler(int num_requests, bool prefix_caching) {
  SchedulerConfig c;
  c.max_num_seqs = num_requests;
  c.max_num_batched_tokens = 8192;
  c.max_model_len = kPromptLen + kMaxSteps + 64;
  const int blocks_per_request = (c.max_model_len + kBlockSize - 1) / kBlockSize;
  auto s = Scheduler::create(c, {num_requests * blocks_per_request, kBlockSize, prefix_caching});
  if (!s) return nullptr;
  for (int i = 0; i < num_requests; ++i) {
    EngineCoreRequest r;
    r.request_id = static_cast<RequestId>(i + 1);
    for (int k = 0; k < kPromptLen; ++k)
      r.prompt_token_ids.push_back((i * 131 + k * 7) % 150000);
    r.params.temperature = 0.0f;
    r.params.stop_token_ids = {3};
    r.eos_token_id = 2;
    if (!(*s)->add_request(std::move(r)).is_ok()) return nullptr;
  }
  // Prefill everything so that the timed steps are pure decode.
  while ((*s)->num_waiting() > 0 || (*s)->find_request(1)->num_output_tokens() == 0) {
    SchedulerOutput out = (*s)->schedule();
    ModelRunnerOutput mo;
    for (const auto& r : out.scheduled)
      mo.sampled_token_ids.push_back(r.needs_sample ? 1000 : -1);
    if (!(*s)->update_from_output(out, mo)) return nullptr;
  }
  return std::move(*s);
}

void BM_SchedulerDecodeStep(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto s = make_running_scheduler(n, state.range(1) != 0);
  if (!s || s->num_running() != n) {
    state.SkipWithError("setup failed");
    return;
  }
  ModelRunnerOutput mo;
  mo.sampled_token_ids.assign(static_cast<size_t>(n), 1000);
  // The buffers EngineCore reuses across steps.
  SchedulerOutput out;
  std::vector<EngineCoreOutput> outs;
  int64_t tokens = 0;
  for (auto _ : state) {
    s->schedule(out);
    Status status = s->update_from_output(out, mo, outs);
    benchmark::DoNotOptimize(status);
    tokens += out.total_num_scheduled_tokens;
  }
  if (s->num_running() != n) state.SkipWithError("requests finished during the benchmark");
  state.counters["requests"] = n;
  state.counters["tokens/step"] =
      static_cast<double>(tokens) / static_cast<double>(state.iterations());
  state.counters["kv_usage"] = s->stats().kv_cache_usage;
}

BENCHMARK(BM_SchedulerDecodeStep)
    ->ArgNames({"running", "prefix_caching"})
    ->Args({1024, 1})
    ->Args({1024, 0})
    ->Args({256, 1})
    ->Iterations(kMaxSteps)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace locus
