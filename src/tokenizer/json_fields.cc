// Typed JSON field access with path-naming errors; see json_fields.h.
#include "tokenizer/json_fields.h"

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace locus::tokenizer {

std::string json_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return fmt::format("{}.{}", parent, key);
}

std::string json_path(std::string_view parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

std::string_view json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    default:
      return "unknown";
  }
}

Status json_type_error(std::string_view path, std::string_view expected, const Json& got) {
  return parse_error(fmt::format("{}: expected {}, got {}", path, expected, json_type_name(got)));
}

const Json* json_member(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

Expected<std::string> json_string(const Json& object, std::string_view key, std::string_view path) {
  const Json* value = json_member(object, key);
  std::string field = json_path(path, key);
  if (value == nullptr) return parse_error(fmt::format("{}: missing (expected a string)", field));
  if (!value->is_string()) return json_type_error(field, "a string", *value);
  return value->get<std::string>();
}

Expected<std::optional<std::string>> json_optional_string(const Json& object, std::string_view key,
                                                          std::string_view path) {
  const Json* value = json_member(object, key);
  if (value == nullptr || value->is_null()) return std::optional<std::string>();
  if (!value->is_string()) return json_type_error(json_path(path, key), "a string or null", *value);
  return std::optional<std::string>(value->get<std::string>());
}

Expected<bool> json_bool(const Json& object, std::string_view key, std::string_view path,
                         bool default_value) {
  const Json* value = json_member(object, key);
  if (value == nullptr || value->is_null()) return default_value;
  if (!value->is_boolean()) return json_type_error(json_path(path, key), "a boolean", *value);
  return value->get<bool>();
}

Expected<std::optional<bool>> json_optional_bool(const Json& object, std::string_view key,
                                                 std::string_view path) {
  const Json* value = json_member(object, key);
  if (value == nullptr || value->is_null()) return std::optional<bool>();
  if (!value->is_boolean()) return json_type_error(json_path(path, key), "a boolean", *value);
  return std::optional<bool>(value->get<bool>());
}

Expected<int64_t> json_int(const Json& object, std::string_view key, std::string_view path) {
  const Json* value = json_member(object, key);
  std::string field = json_path(path, key);
  if (value == nullptr) return parse_error(fmt::format("{}: missing (expected an integer)", field));
  if (!value->is_number_integer()) return json_type_error(field, "an integer", *value);
  return value->get<int64_t>();
}

Expected<int64_t> json_int_or(const Json& object, std::string_view key, std::string_view path,
                              int64_t default_value) {
  const Json* value = json_member(object, key);
  if (value == nullptr || value->is_null()) return default_value;
  if (!value->is_number_integer())
    return json_type_error(json_path(path, key), "an integer", *value);
  return value->get<int64_t>();
}

Expected<char32_t> json_char(const Json& object, std::string_view key, std::string_view path,
                             std::optional<char32_t> default_value) {
  const Json* value = json_member(object, key);
  std::string field = json_path(path, key);
  if (value == nullptr || value->is_null()) {
    if (default_value) return *default_value;
    return parse_error(fmt::format("{}: missing (expected a one-character string)", field));
  }
  if (!value->is_string()) return json_type_error(field, "a one-character string", *value);
  const auto& text = value->get_ref<const std::string&>();
  if (text.empty() || !utf8::is_valid(text) ||
      utf8::sequence_length(static_cast<unsigned char>(text[0])) != text.size()) {
    return parse_error(fmt::format("{}: expected exactly one character, got '{}'", field, text));
  }
  return utf8::first_char(text);
}

Expected<std::string> json_component_type(const Json& object, std::string_view path,
                                          std::string_view what) {
  if (!object.is_object()) return json_type_error(path, fmt::format("a {} object", what), object);
  const Json* type = json_member(object, "type");
  if (type == nullptr) return parse_error(fmt::format("{}: {} has no \"type\"", path, what));
  if (!type->is_string()) return json_type_error(json_path(path, "type"), "a string", *type);
  return type->get<std::string>();
}

}  // namespace locus::tokenizer
