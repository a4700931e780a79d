#include "loadgen/datasets.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

namespace locus::loadgen {

using Json = nlohmann::json;

Expected<std::vector<BenchRequest>> sharegpt_dataset(const std::filesystem::path& path,
                                                     const ShareGptOptions& o,
                                                     const Encode& encode) {
  std::ifstream f(path);
  if (!f) return io_error(fmt::format("{}: cannot open the ShareGPT file", path.string()));
  std::stringstream text;
  text << f.rdbuf();
  const Json doc = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return parse_error(fmt::format("{}: not valid JSON", path.string()));
  if (!doc.is_array()) {
    return parse_error(fmt::format("{}: expected a JSON array of conversations", path.string()));
  }
  // (prompt, reply) of every entry with at least two turns, then vLLM's shuffle-and-filter.
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const Json& entry : doc) {
    if (!entry.is_object()) continue;
    auto conv = entry.find("conversations");
    if (conv == entry.end() || !conv->is_array() || conv->size() < 2) continue;
    const Json& a = (*conv)[0];
    const Json& b = (*conv)[1];
    if (!a.is_object() || !b.is_object() || !a.contains("value") || !b.contains("value") ||
        !a["value"].is_string() || !b["value"].is_string()) {
      continue;
    }
    pairs.emplace_back(a["value"].get<std::string>(), b["value"].get<std::string>());
  }
  std::mt19937_64 rng(o.seed);
  std::shuffle(pairs.begin(), pairs.end(), rng);
  std::vector<BenchRequest> out;
  for (const auto& [prompt, reply] : pairs) {
    if (static_cast<int>(out.size()) >= o.num_prompts) break;
    auto prompt_ids = encode(prompt);
    if (!prompt_ids) return prompt_ids.status().with_context(path.string());
    int64_t output_len = 0;
    if (o.output_len) {
      output_len = *o.output_len;
    } else {
      auto reply_ids = encode(reply);
      if (!reply_ids) return reply_ids.status().with_context(path.string());
      output_len = static_cast<int64_t>(reply_ids->size());
    }
    const auto prompt_len = static_cast<int64_t>(prompt_ids->size());
    // vLLM's is_valid_sequence: too short to time, or too long for common context limits.
    if (prompt_len < 4 || (!o.output_len && output_len < 4)) continue;
    if (prompt_len > 1024 || prompt_len + output_len > 2048) continue;
    BenchRequest r;
    r.prompt_ids = std::move(*prompt_ids);
    r.prompt_text = prompt;
    r.output_len = output_len;
    out.push_back(std::move(r));
  }
  if (static_cast<int>(out.size()) < o.num_prompts) {
    return invalid_argument(fmt::format(
        "{}: only {} conversations pass the filters (two turns, prompt 4..1024 tokens, prompt + "
        "reply <= 2048), fewer than --num-prompts {}",
        path.string(), out.size(), o.num_prompts));
  }
  return out;
}

std::vector<BenchRequest> prefix_repetition_dataset(const PrefixRepetitionOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> token(o.id_low, std::max(o.id_low, o.id_high - 1));
  const int num_prefixes = std::max(o.num_prefixes, 1);
  std::vector<std::vector<int32_t>> prefixes(static_cast<size_t>(num_prefixes));
  for (auto& p : prefixes) {
    p.resize(static_cast<size_t>(std::max<int64_t>(o.prefix_len, 0)));
    for (int32_t& t : p)
      t = token(rng);
  }
  std::vector<BenchRequest> out(static_cast<size_t>(std::max(o.num_prompts, 0)));
  for (size_t i = 0; i < out.size(); ++i) {
    BenchRequest& r = out[i];
    r.prompt_ids = prefixes[i % prefixes.size()];  // an equal share of requests per prefix
    for (int64_t j = 0; j < o.suffix_len; ++j)
      r.prompt_ids.push_back(token(rng));
    r.output_len = o.output_len;
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

}  // namespace locus::loadgen
