#include "bench/latency.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "engine/local_model_runner.h"

namespace locus::bench {
namespace {

// Arrival times of each output delta, recorded on the engine's output thread as it pushes them
// (not when a client thread gets around to reading), with the number of tokens in each.
struct Timeline {
  std::mutex mutex;
  std::vector<std::pair<double, int>> deltas;
  bool finished = false;
};

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

Percentiles percentiles(std::vector<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  p.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  p.p50 = percentile(values, 0.5);
  p.p90 = percentile(values, 0.9);
  p.p99 = percentile(values, 0.99);
  return p;
}

Expected<LatencyResult> run_latency(ModelEngine& me, const LatencyOptions& o, int batch_size) {
  if (o.input_len <= 0 || o.output_len <= 1 || batch_size <= 0) {
    return invalid_argument("bench latency: input_len >= 1, output_len >= 2 and batch size >= 1");
  }
  EngineClient& engine = *me.engine;
  std::mt19937_64 rng(o.seed ^ (static_cast<uint64_t>(batch_size) << 32));
  const int64_t vocab = std::min<int64_t>(me.config.vocab_size, 1 << 30);
  std::uniform_int_distribution<int32_t> token(1, static_cast<int32_t>(vocab - 1));

  SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = static_cast<int>(o.output_len);
  params.ignore_eos = true;

  LatencyResult r;
  r.batch_size = batch_size;
  std::vector<double> ttft, tpot, steady, batch_latency, throughput;
  const LocalModelRunner* runner = me.runner;
  int64_t graph0 = 0, eager0 = 0, fed0 = 0;
  for (int iter = 0; iter < o.warmup_iters + o.iters; ++iter) {
    const bool measured = iter >= o.warmup_iters;
    if (measured && iter == o.warmup_iters && runner != nullptr) {
      graph0 = runner->graph_steps();
      eager0 = runner->eager_steps();
      fed0 = runner->fed_steps();
    }
    std::vector<std::shared_ptr<RequestStream>> streams;
    std::vector<std::shared_ptr<Timeline>> timelines;
    const double start = LLMEngine::now();
    for (int b = 0; b < batch_size; ++b) {
      std::vector<int32_t> prompt(static_cast<size_t>(o.input_len));
      for (int32_t& t : prompt)
        t = token(rng);
      auto timeline = std::make_shared<Timeline>();
      LOCUS_ASSIGN_OR_RETURN(auto stream, engine.add_request(std::move(prompt), params));
      std::weak_ptr<RequestStream> weak = stream;
      stream->set_on_ready([timeline, weak] {
        auto s = weak.lock();
        if (!s) return;
        const double now = LLMEngine::now();
        std::lock_guard lock(timeline->mutex);
        while (auto out = s->try_next()) {
          if (!out->has_value()) {
            timeline->finished = true;
            break;
          }
          timeline->deltas.emplace_back(now, static_cast<int>((*out)->token_ids.size()));
          if ((*out)->finished) timeline->finished = true;
        }
      });
      streams.push_back(std::move(stream));
      timelines.push_back(std::move(timeline));
    }
    // Wait for every request; the callbacks do the reading.
    while (engine.num_unfinished_requests() > 0) {
      LOCUS_RETURN_IF_ERROR(engine.health());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!measured) continue;
    double last_first = 0, end = 0;
    for (auto& t : timelines) {
      std::lock_guard lock(t->mutex);
      if (t->deltas.empty()) return internal_error("bench latency: a request produced no tokens");
      last_first = std::max(last_first, t->deltas.front().first);
      end = std::max(end, t->deltas.back().first);
    }
    for (auto& t : timelines) {
      std::lock_guard lock(t->mutex);
      const double first = t->deltas.front().first;
      const double finish = t->deltas.back().first;
      ttft.push_back(first - start);
      tpot.push_back((finish - first) / static_cast<double>(o.output_len - 1));
      // Steady phase: from the first delta at or after the batch's last first token.
      double s0 = -1;
      int tokens_after = 0;
      for (auto [when, n] : t->deltas) {
        if (when < last_first) continue;
        if (s0 < 0) {
          s0 = when;
        } else {
          tokens_after += n;
        }
      }
      if (tokens_after > 0) steady.push_back((finish - s0) / tokens_after);
    }
    int concurrent = 0;
    for (auto& t : timelines) {
      std::lock_guard lock(t->mutex);
      if (t->deltas.back().first >= last_first) ++concurrent;
    }
    r.concurrent = r.concurrent == 0 ? concurrent : std::min(r.concurrent, concurrent);
    batch_latency.push_back(end - start);
    throughput.push_back(static_cast<double>(batch_size * o.output_len) / (end - start));
  }
  if (runner != nullptr) {
    r.graph_steps = runner->graph_steps() - graph0;
    r.eager_steps = runner->eager_steps() - eager0;
    r.fed_steps = runner->fed_steps() - fed0;
  }
  r.ttft_s = percentiles(ttft);
  r.tpot_s = percentiles(tpot);
  r.steady_tpot_s = percentiles(steady);
  r.batch_latency_s = percentiles(batch_latency);
  r.output_tokens_per_s = percentiles(throughput).mean;
  return r;
}

}  // namespace locus::bench
