// generation_config.json: the sampling defaults and end-of-sequence ids a model ships with.
// vLLM applies these by default (--generation-config auto); locus does the same.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace locus {

struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;  // "eos_token_id": an id or a list of ids
  std::optional<int32_t> bos_token_id;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int> max_new_tokens;
  // do_sample false means greedy in transformers; vLLM ignores it, and so do we, but it is kept
  // so callers can report it.
  std::optional<bool> do_sample;
};

// Parses the file's text; `source` names it in errors. Unknown fields are ignored.
Expected<GenerationConfig> parse_generation_config(std::string_view json_text,
                                                   std::string_view source);

// Reads <model_dir>/generation_config.json; a folder without one gives an empty config.
Expected<GenerationConfig> load_generation_config(const std::filesystem::path& model_dir);

}  // namespace locus
