// Typed, non-throwing reads of fields from a Hugging Face config JSON object, with error messages
// that name the file, the field path and the architecture. Shared by model_config, rope_config and
// quant_config; never lets an nlohmann exception escape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace locus::config_json {

// "integer", "number", "string", "boolean", "array", "object" or "null": the JSON type of a
// value in the words an error message uses.
std::string_view type_name(const nlohmann::json& value);

// A view of one JSON object plus what is needed to say where a bad field lives:
//   source  - the file the object came from ("config.json", "/models/x/config.json")
//   path    - the object's own path inside the file ("" for the root, "rope_scaling." below it)
//   context - the architecture being parsed ("Qwen3MoeForCausalLM"), appended in parentheses
// Missing and null are treated alike by every optional read: HF configs write both.
class Fields {
 public:
  Fields(const nlohmann::json& object, std::string source, std::string path, std::string context);

  // A view of the object held in `key` (which must be an object); the path grows by "key.".
  Expected<Fields> child(std::string_view key) const;
  // A view of another object that lives at `path` in the same file.
  Fields nested(const nlohmann::json& object, std::string path) const;

  // The raw value, or nullptr when the key is absent or null.
  const nlohmann::json* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  Expected<int64_t> require_int(std::string_view key) const;
  Expected<std::optional<int64_t>> optional_int(std::string_view key) const;
  Expected<int64_t> int_or(std::string_view key, int64_t fallback) const;

  Expected<double> require_number(std::string_view key) const;
  Expected<std::optional<double>> optional_number(std::string_view key) const;
  Expected<double> number_or(std::string_view key, double fallback) const;

  Expected<bool> bool_or(std::string_view key, bool fallback) const;

  Expected<std::string> require_string(std::string_view key) const;
  Expected<std::optional<std::string>> optional_string(std::string_view key) const;
  Expected<std::string> string_or(std::string_view key, std::string_view fallback) const;

  // Arrays; absent or null gives an empty vector.
  Expected<std::vector<int64_t>> int_list(std::string_view key) const;
  Expected<std::vector<std::string>> string_list(std::string_view key) const;
  // An integer or a list of integers ("eos_token_id": 1 or [1, 2]).
  Expected<std::vector<int64_t>> int_or_int_list(std::string_view key) const;

  // "<source>: missing required field '<path><key>' (<context>)", code kNotFound.
  Status missing(std::string_view key) const;
  // "<source>: field '<path><key>' must be <expected>, got <type> (<context>)", kInvalidArgument.
  Status wrong_type(std::string_view key, std::string_view expected,
                    const nlohmann::json& value) const;
  // "<source>: <message> (<context>)" with the given code.
  Status error(ErrorCode code, std::string_view message) const;
  Status invalid(std::string_view message) const {
    return error(ErrorCode::kInvalidArgument, message);
  }

  // "<path><key>", the name a message uses for a field.
  std::string field_name(std::string_view key) const;

  const nlohmann::json& object() const { return *object_; }
  const std::string& source() const { return source_; }
  const std::string& context() const { return context_; }
  void set_context(std::string context) { context_ = std::move(context); }

 private:
  const nlohmann::json* object_;
  std::string source_;
  std::string path_;
  std::string context_;
};

}  // namespace locus::config_json
