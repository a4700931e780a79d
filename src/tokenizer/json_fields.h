// Typed access to the fields of tokenizer.json and tokenizer_config.json. Every error names the
// field's path ("pre_tokenizer.pretokenizers[1].behavior: expected a string, got number") so a
// user can find the offending line; the caller prefixes the file name.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace locus::tokenizer {

using Json = nlohmann::json;

// "a.b", "a[3]": paths for nested fields.
std::string json_path(std::string_view parent, std::string_view key);
std::string json_path(std::string_view parent, size_t index);

// The JSON type of `value` in words, for messages.
std::string_view json_type_name(const Json& value);

Status json_type_error(std::string_view path, std::string_view expected, const Json& got);

// The member `key` of `object`, or nullptr when absent.
const Json* json_member(const Json& object, std::string_view key);

Expected<std::string> json_string(const Json& object, std::string_view key, std::string_view path);
// Absent or null → nullopt.
Expected<std::optional<std::string>> json_optional_string(const Json& object, std::string_view key,
                                                          std::string_view path);
Expected<bool> json_bool(const Json& object, std::string_view key, std::string_view path,
                         bool default_value);
Expected<std::optional<bool>> json_optional_bool(const Json& object, std::string_view key,
                                                 std::string_view path);
Expected<int64_t> json_int(const Json& object, std::string_view key, std::string_view path);
Expected<int64_t> json_int_or(const Json& object, std::string_view key, std::string_view path,
                              int64_t default_value);
// A string field holding exactly one character (Metaspace's replacement, Strip's content).
Expected<char32_t> json_char(const Json& object, std::string_view key, std::string_view path,
                             std::optional<char32_t> default_value = std::nullopt);
// The "type" of a component object; `what` names the component kind for the message.
Expected<std::string> json_component_type(const Json& object, std::string_view path,
                                          std::string_view what);

}  // namespace locus::tokenizer
