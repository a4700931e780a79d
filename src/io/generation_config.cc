#include "io/generation_config.h"

#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/config_json.h"

namespace locus {
namespace {

template <typename T>
Expected<std::optional<T>> optional_number(const config_json::Fields& f, std::string_view key,
                                           double lo, double hi) {
  LOCUS_ASSIGN_OR_RETURN(std::optional<double> v, f.optional_number(key));
  if (!v) return std::optional<T>();
  if (!(*v >= lo && *v <= hi)) {
    return f.invalid(fmt::format("field '{}' is {}, outside [{}, {}]", key, *v, lo, hi));
  }
  return std::optional<T>(static_cast<T>(*v));
}

Expected<std::optional<int>> optional_small_int(const config_json::Fields& f,
                                                std::string_view key) {
  LOCUS_ASSIGN_OR_RETURN(std::optional<int64_t> v, f.optional_int(key));
  if (!v) return std::optional<int>();
  if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    return f.invalid(fmt::format("field '{}' is {}, out of range", key, *v));
  }
  return std::optional<int>(static_cast<int>(*v));
}

}  // namespace

Expected<GenerationConfig> parse_generation_config(std::string_view json_text,
                                                   std::string_view source) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return parse_error(fmt::format("{}: malformed JSON: {}", source, e.what()));
  }
  if (!root.is_object()) return invalid_argument(fmt::format("{}: not a JSON object", source));
  config_json::Fields f(root, std::string(source), "", "generation config");
  GenerationConfig g;
  LOCUS_ASSIGN_OR_RETURN(std::vector<int64_t> eos, f.int_or_int_list("eos_token_id"));
  for (int64_t id : eos) {
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return f.invalid(fmt::format("eos_token_id {} is not a token id", id));
    }
    g.eos_token_ids.push_back(static_cast<int32_t>(id));
  }
  LOCUS_ASSIGN_OR_RETURN(std::optional<int64_t> bos, f.optional_int("bos_token_id"));
  if (bos && *bos >= 0 && *bos <= std::numeric_limits<int32_t>::max()) {
    g.bos_token_id = static_cast<int32_t>(*bos);
  }
  LOCUS_ASSIGN_OR_RETURN(g.temperature, optional_number<float>(f, "temperature", 0.0, 1e6));
  LOCUS_ASSIGN_OR_RETURN(g.top_p, optional_number<float>(f, "top_p", 0.0, 1.0));
  LOCUS_ASSIGN_OR_RETURN(g.min_p, optional_number<float>(f, "min_p", 0.0, 1.0));
  LOCUS_ASSIGN_OR_RETURN(g.repetition_penalty,
                         optional_number<float>(f, "repetition_penalty", 0.0, 1e6));
  LOCUS_ASSIGN_OR_RETURN(g.top_k, optional_small_int(f, "top_k"));
  LOCUS_ASSIGN_OR_RETURN(g.max_new_tokens, optional_small_int(f, "max_new_tokens"));
  if (const nlohmann::json* v = f.find("do_sample")) {
    if (!v->is_boolean()) return f.wrong_type("do_sample", "boolean", *v);
    g.do_sample = v->get<bool>();
  }
  return g;
}

Expected<GenerationConfig> load_generation_config(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return GenerationConfig{};
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("{}: cannot open for reading", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_generation_config(text.str(), path.string());
}

}  // namespace locus
