// The CPU reference sampler per row at a real vocabulary size (Qwen3: 151936). It is the oracle
// for the CUDA sampler, not the production path; the numbers say what the CPU path costs when a
// backend has no sampler of its own.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/counter_rng.h"
#include "sampling/sampler.h"

namespace locus {
namespace {

constexpr int kVocab = 151936;

std::vector<float> make_logits(int rows) {
  std::vector<float> v(static_cast<size_t>(rows) * kVocab);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 20.0f * (counter_uniform(42, i) - 0.5f);
  return v;
}

void run(benchmark::State& state, const SamplingParams& params) {
  const int rows = static_cast<int>(state.range(0));
  const auto logits = make_logits(rows);
  std::vector<int32_t> prompt(512);
  std::vector<int32_t> output(256);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>(i * 97 % kVocab);
  for (size_t i = 0; i < output.size(); ++i)
    output[i] = static_cast<int32_t>(i * 13 % kVocab);
  std::vector<SamplingRow> batch(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    batch[static_cast<size_t>(r)] = {&params, prompt, output, 2, static_cast<uint64_t>(r)};
  }
  Sampler sampler;
  for (auto _ : state) {
    auto res = sampler.sample(logits, kVocab, batch);
    benchmark::DoNotOptimize(res);
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(rows) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_SampleGreedy(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 0.0f;
  run(state, p);
}

void BM_SampleTopKTopP(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 50;
  p.top_p = 0.9f;
  run(state, p);
}

void BM_SampleTopPOnly(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;  // no top-k: sorts every token (the CPU reference's worst case)
  run(state, p);
}

void BM_SamplePenaltiesLogprobs(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.repetition_penalty = 1.1f;
  p.frequency_penalty = 0.2f;
  p.presence_penalty = 0.2f;
  p.logprobs = 5;
  run(state, p);
}

BENCHMARK(BM_SampleGreedy)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleTopKTopP)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleTopPOnly)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplePenaltiesLogprobs)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace locus
