// The other datasets of `locus bench serve` (vLLM's names and filters):
//  - sharegpt: a JSON file of conversations; the first human turn is the prompt (sent as text),
//    the reply's token count is the output length unless fixed;
//  - prefix_repetition: num_prefixes random prefixes, each shared by an equal share of the
//    requests, with a random suffix per request, shuffled (exercises prefix caching).
// The token counting is done by the caller's tokenizer, passed as a function.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "loadgen/random_dataset.h"

namespace locus::loadgen {

using Encode = std::function<Expected<std::vector<int32_t>>(const std::string&)>;

struct ShareGptOptions {
  int num_prompts = 1000;
  std::optional<int64_t> output_len;  // --sharegpt-output-len: fixed instead of the reply's
  uint64_t seed = 0;
};

// Errors name the file and what is wrong with it. Fewer valid conversations than num_prompts is
// an error too (vLLM would silently send fewer).
Expected<std::vector<BenchRequest>> sharegpt_dataset(const std::filesystem::path& path,
                                                     const ShareGptOptions& options,
                                                     const Encode& encode);

struct PrefixRepetitionOptions {
  int num_prompts = 1000;
  int64_t prefix_len = 256;
  int64_t suffix_len = 256;
  int num_prefixes = 10;
  int64_t output_len = 128;
  int32_t id_low = 0;
  int32_t id_high = 0;
  uint64_t seed = 0;
};

std::vector<BenchRequest> prefix_repetition_dataset(const PrefixRepetitionOptions& options);

}  // namespace locus::loadgen
