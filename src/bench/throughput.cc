#include "bench/throughput.h"

#include <fmt/format.h>

#include <memory>
#include <thread>
#include <vector>

#include "loadgen/random_dataset.h"

namespace locus::bench {

Expected<ThroughputResult> run_throughput(ModelEngine& me, const ThroughputOptions& o) {
  if (o.num_prompts <= 0 || o.input_len <= 0 || o.output_len <= 0 ||
      !(o.range_ratio >= 0 && o.range_ratio < 1)) {
    return invalid_argument(
        "bench throughput: num_prompts, input_len and output_len >= 1, range_ratio in [0, 1)");
  }
  loadgen::RandomDatasetOptions ro;
  ro.num_prompts = o.num_prompts;
  ro.input_len = o.input_len;
  ro.output_len = o.output_len;
  ro.range_ratio = o.range_ratio;
  ro.seed = o.seed;
  ro.id_low = 1;
  ro.id_high = static_cast<int32_t>(std::min<int64_t>(me.config.vocab_size, 1 << 30));
  std::vector<loadgen::BenchRequest> requests = loadgen::random_dataset(ro);

  EngineClient& engine = *me.engine;
  const int64_t max_len = engine.config().scheduler.max_model_len;
  ThroughputResult r;
  std::vector<std::shared_ptr<RequestStream>> streams;
  streams.reserve(requests.size());
  const double start = LLMEngine::now();
  for (loadgen::BenchRequest& req : requests) {
    if (static_cast<int64_t>(req.prompt_ids.size()) + req.output_len > max_len) {
      return invalid_argument(
          fmt::format("bench throughput: a request of {} + {} tokens exceeds --max-model-len {}",
                      req.prompt_ids.size(), req.output_len, max_len));
    }
    SamplingParams params;
    params.temperature = 0.0;
    params.max_tokens = static_cast<int>(req.output_len);
    params.ignore_eos = true;
    r.prompt_tokens += static_cast<int64_t>(req.prompt_ids.size());
    LOCUS_ASSIGN_OR_RETURN(auto stream, engine.add_request(std::move(req.prompt_ids), params));
    streams.push_back(std::move(stream));
  }
  // Read every stream to its end: the output tokens are counted, not assumed.
  for (auto& stream : streams) {
    while (true) {
      auto out = stream->next();
      if (!out) return out.status();
      r.output_tokens += static_cast<int64_t>(out->token_ids.size());
      if (out->request_finished) break;
    }
  }
  r.elapsed_s = LLMEngine::now() - start;
  r.num_requests = static_cast<int>(streams.size());
  if (r.elapsed_s > 0) {
    r.requests_per_s = r.num_requests / r.elapsed_s;
    r.total_tokens_per_s = static_cast<double>(r.prompt_tokens + r.output_tokens) / r.elapsed_s;
    r.output_tokens_per_s = static_cast<double>(r.output_tokens) / r.elapsed_s;
  }
  return r;
}

}  // namespace locus::bench
