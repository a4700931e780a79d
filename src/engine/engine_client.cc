#include "engine/engine_client.h"

namespace locus {

Expected<std::vector<RequestResult>> EngineClient::generate(
    const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& params) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& prompt : prompts) {
    auto stream = add_request(prompt, params);
    if (!stream) {
      for (auto& s : streams)
        abort(s->request_id());
      return stream.error();
    }
    streams.push_back(std::move(*stream));
  }
  std::vector<RequestResult> results;
  for (auto& s : streams) {
    auto r = s->collect();
    if (!r) {
      for (auto& other : streams)
        abort(other->request_id());  // finished ones are ignored
      return r.error();
    }
    results.push_back(std::move(*r));
  }
  return results;
}

}  // namespace locus
