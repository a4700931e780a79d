// vLLM's `random` dataset for `locus bench serve`: prompts of random token ids whose lengths are
// drawn uniformly from [len * (1 - range_ratio), len * (1 + range_ratio)], output lengths the
// same way; an optional shared prefix of fixed random ids in front of every prompt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace locus::loadgen {

struct BenchRequest {
  std::vector<int32_t> prompt_ids;  // sent as the prompt unless prompt_text is set
  std::string prompt_text;          // datasets of real text (sharegpt) send the text itself
  int64_t output_len = 0;
};

struct RandomDatasetOptions {
  int num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;  // in [0, 1)
  int64_t prefix_len = 0;
  // Token ids are drawn from [id_low, id_high): ordinary vocabulary entries, so servers do not
  // see control tokens in the middle of a prompt.
  int32_t id_low = 0;
  int32_t id_high = 0;
  uint64_t seed = 0;
};

std::vector<BenchRequest> random_dataset(const RandomDatasetOptions& options);

}  // namespace locus::loadgen
