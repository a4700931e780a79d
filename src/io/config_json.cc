// Non-throwing typed reads of HF config fields; every check happens before nlohmann's get<>, so
// nothing here can throw on a malformed file.
#include "io/config_json.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace locus::config_json {
namespace {

// JSON numbers written as 2048.0 still count as integers: some exporters write every number as
// a float, and rejecting them would only push users to hand-edit configs.
std::optional<int64_t> as_int(const nlohmann::json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(u);
    }
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^63 is exactly representable; anything at or past it does not fit an int64_t.
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2233720368547758e18) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view type_name(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer";
    case nlohmann::json::value_t::number_float:
      return "number";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::object:
      return "object";
    default:
      return "unknown";
  }
}

Fields::Fields(const nlohmann::json& object, std::string source, std::string path,
               std::string context)
    : object_(&object),
      source_(std::move(source)),
      path_(std::move(path)),
      context_(std::move(context)) {}

Expected<Fields> Fields::child(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return missing(key);
  if (!v->is_object()) return wrong_type(key, "an object", *v);
  return Fields(*v, source_, field_name(key) + ".", context_);
}

Fields Fields::nested(const nlohmann::json& object, std::string path) const {
  return Fields(object, source_, std::move(path), context_);
}

const nlohmann::json* Fields::find(std::string_view key) const {
  if (!object_->is_object()) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

std::string Fields::field_name(std::string_view key) const {
  return fmt::format("{}{}", path_, key);
}

Status Fields::missing(std::string_view key) const {
  return error(ErrorCode::kNotFound, fmt::format("missing required field '{}'", field_name(key)));
}

Status Fields::wrong_type(std::string_view key, std::string_view expected,
                          const nlohmann::json& value) const {
  return error(
      ErrorCode::kInvalidArgument,
      fmt::format("field '{}' must be {}, got {}", field_name(key), expected, type_name(value)));
}

Status Fields::error(ErrorCode code, std::string_view message) const {
  if (context_.empty()) return {code, fmt::format("{}: {}", source_, message)};
  return {code, fmt::format("{}: {} ({})", source_, message, context_)};
}

Expected<int64_t> Fields::require_int(std::string_view key) const {
  LOCUS_ASSIGN_OR_RETURN(auto v, optional_int(key));
  if (!v) return missing(key);
  return *v;
}

Expected<std::optional<int64_t>> Fields::optional_int(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::optional<int64_t>();
  // Booleans are not integers here even though JSON libraries sometimes convert them.
  auto i = v->is_boolean() ? std::nullopt : as_int(*v);
  if (!i) return wrong_type(key, "an integer", *v);
  return std::optional<int64_t>(*i);
}

Expected<int64_t> Fields::int_or(std::string_view key, int64_t fallback) const {
  LOCUS_ASSIGN_OR_RETURN(auto v, optional_int(key));
  return v.value_or(fallback);
}

Expected<double> Fields::require_number(std::string_view key) const {
  LOCUS_ASSIGN_OR_RETURN(auto v, optional_number(key));
  if (!v) return missing(key);
  return *v;
}

Expected<std::optional<double>> Fields::optional_number(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return wrong_type(key, "a number", *v);
  return std::optional<double>(v->get<double>());
}

Expected<double> Fields::number_or(std::string_view key, double fallback) const {
  LOCUS_ASSIGN_OR_RETURN(auto v, optional_number(key));
  return v.value_or(fallback);
}

Expected<bool> Fields::bool_or(std::string_view key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

Expected<std::string> Fields::require_string(std::string_view key) const {
  LOCUS_ASSIGN_OR_RETURN(auto v, optional_string(key));
  if (!v) return missing(key);
  return std::move(*v);
}

Expected<std::optional<std::string>> Fields::optional_string(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return wrong_type(key, "a string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

Expected<std::string> Fields::string_or(std::string_view key, std::string_view fallback) const {
  LOCUS_ASSIGN_OR_RETURN(auto v, optional_string(key));
  if (!v) return std::string(fallback);
  return std::move(*v);
}

Expected<std::vector<int64_t>> Fields::int_list(std::string_view key) const {
  std::vector<int64_t> out;
  const nlohmann::json* v = find(key);
  if (v == nullptr) return out;
  if (!v->is_array()) return wrong_type(key, "an array of integers", *v);
  for (const auto& e : *v) {
    auto i = e.is_boolean() ? std::nullopt : as_int(e);
    if (!i) return wrong_type(key, "an array of integers", *v);
    out.push_back(*i);
  }
  return out;
}

Expected<std::vector<std::string>> Fields::string_list(std::string_view key) const {
  std::vector<std::string> out;
  const nlohmann::json* v = find(key);
  if (v == nullptr) return out;
  if (!v->is_array()) return wrong_type(key, "an array of strings", *v);
  for (const auto& e : *v) {
    if (!e.is_string()) return wrong_type(key, "an array of strings", *v);
    out.push_back(e.get<std::string>());
  }
  return out;
}

Expected<std::vector<int64_t>> Fields::int_or_int_list(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::vector<int64_t>();
  if (v->is_array()) return int_list(key);
  auto i = v->is_boolean() ? std::nullopt : as_int(*v);
  if (!i) return wrong_type(key, "an integer or an array of integers", *v);
  return std::vector<int64_t>{*i};
}

}  // namespace locus::config_json
