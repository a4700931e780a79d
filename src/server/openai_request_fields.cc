// Typed readers of request JSON fields (see openai_request_fields.h).
#include "server/openai_request_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace locus::openai::request_fields {
namespace {

// Deeper bodies are refused before anything copies or walks them recursively (copying a JSON
// value, a chat template, dump() all recurse; an 8 MiB body of '[' would overflow the stack).
constexpr int kMaxJsonDepth = 128;

// True when some value nests deeper than `max_depth` arrays/objects; iterative on purpose.
bool exceeds_depth(const Json& root, int max_depth) {
  std::vector<std::pair<const Json*, int>> stack{{&root, 1}};
  while (!stack.empty()) {
    auto [value, depth] = stack.back();
    stack.pop_back();
    if (!value->is_structured()) continue;
    if (depth > max_depth) return true;
    for (const Json& child : *value)
      stack.emplace_back(&child, depth + 1);
  }
  return false;
}

// The parser's message quotes the bytes it last read, which may be the invalid UTF-8 itself; an
// error message must stay valid UTF-8 or serializing the error body would fail in turn.
std::string to_valid_utf8(std::string_view s) {
  // nlohmann's own replacing serializer decides validity exactly as its parser does.
  try {
    const std::string quoted =
        nlohmann::json(std::string(s))
            .dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
    return nlohmann::json::parse(quoted).get<std::string>();
  } catch (const std::exception&) {
    return "(unprintable)";
  }
}

std::string join_param(std::string_view prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : fmt::format("{}.{}", prefix, key);
}

}  // namespace

ApiError bad_request(std::string message, std::string param) {
  return ApiError{400, std::move(message), std::move(param)};
}

ApiResult<Json> parse_body(std::string_view body) {
  Json parsed;
  try {
    parsed = Json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::exception& e) {
    const std::string what = to_valid_utf8(e.what());
    if (what.find("UTF-8") != std::string::npos) {
      return bad_request(fmt::format("The request body is not valid UTF-8: {}", what));
    }
    return bad_request(fmt::format("The request body is not valid JSON: {}", what));
  } catch (const std::exception& e) {
    return bad_request(
        fmt::format("The request body is not valid JSON: {}", to_valid_utf8(e.what())));
  }
  if (!parsed.is_object()) {
    return bad_request(fmt::format("The request body is not valid JSON: expected an object, got {}",
                                   parsed.type_name()));
  }
  if (exceeds_depth(parsed, kMaxJsonDepth)) {
    return bad_request(
        fmt::format("The request body is nested more than {} levels deep.", kMaxJsonDepth));
  }
  return parsed;
}

// The value of `key`, or nullptr when absent or null (pydantic's Optional: null means unset).
const Json* find_field(const Json& object, const std::string& key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// Pydantic's lax integer: JSON integers, and floats without a fractional part (2.0); never
// bools or strings. Values outside int64 are refused here rather than wrapped.
Error to_int64(const Json& value, const std::string& param, int64_t& out) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return bad_request(fmt::format("{}: integer {} is out of range", param, u), param);
    }
    out = static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (value.is_number_integer()) {
    out = value.get<int64_t>();
    return std::nullopt;
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d)) {
      return bad_request(
          fmt::format("{}: Input should be a valid integer, got a number with a fractional part",
                      param),
          param);
    }
    // 2^63 is exactly representable; anything at or above it (or below -2^63) is not int64.
    if (d >= 9223372036854775808.0 || d < -9223372036854775808.0) {
      return bad_request(fmt::format("{}: integer {} is out of range", param, d), param);
    }
    out = static_cast<int64_t>(d);
    return std::nullopt;
  }
  return bad_request(
      fmt::format("{}: Input should be a valid integer, got {}", param, value.type_name()), param);
}

Error to_int(const Json& value, const std::string& param, int& out) {
  int64_t v = 0;
  if (auto e = to_int64(value, param, v)) return e;
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return bad_request(fmt::format("{}: integer {} is out of range", param, v), param);
  }
  out = static_cast<int>(v);
  return std::nullopt;
}

Error get_int(const Json& object, const std::string& key, std::optional<int>& out,
              std::string_view prefix) {
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  int v = 0;
  if (auto e = to_int(*value, join_param(prefix, key), v)) return e;
  out = v;
  return std::nullopt;
}

Error get_int(const Json& object, const std::string& key, int& out) {
  std::optional<int> v;
  if (auto e = get_int(object, key, v)) return e;
  if (v) out = *v;
  return std::nullopt;
}

Error get_float(const Json& object, const std::string& key, float& out) {
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) {
    return bad_request(
        fmt::format("{}: Input should be a valid number, got {}", key, value->type_name()), key);
  }
  const double d = value->get<double>();
  // Converting a double beyond float's range is undefined behaviour, so refuse it first.
  if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max())) {
    return bad_request(fmt::format("{}: number {} is out of range", key, d), key);
  }
  out = static_cast<float>(d);
  return std::nullopt;
}

Error get_bool(const Json& object, const std::string& key, bool& out, std::string_view prefix) {
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    const std::string param = join_param(prefix, key);
    return bad_request(
        fmt::format("{}: Input should be a valid boolean, got {}", param, value->type_name()),
        param);
  }
  out = value->get<bool>();
  return std::nullopt;
}

Error get_string(const Json& object, const std::string& key, std::optional<std::string>& out) {
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    return bad_request(
        fmt::format("{}: Input should be a valid string, got {}", key, value->type_name()), key);
  }
  out = value->get<std::string>();
  return std::nullopt;
}

Error get_int32_list(const Json& object, const std::string& key, std::vector<int32_t>& out) {
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_array()) {
    return bad_request(fmt::format("{}: Input should be a valid list of integers, got {}", key,
                                   value->type_name()),
                       key);
  }
  std::vector<int32_t> ids;
  ids.reserve(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    int v = 0;
    if (auto e = to_int((*value)[i], fmt::format("{}[{}]", key, i), v)) return e;
    ids.push_back(v);
  }
  out = std::move(ids);
  return std::nullopt;
}

Error get_object(const Json& body, const std::string& key, Json& out) {
  const Json* value = find_field(body, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_object()) {
    return bad_request(
        fmt::format("{}: Input should be a valid dictionary, got {}", key, value->type_name()),
        key);
  }
  out = *value;
  return std::nullopt;
}

}  // namespace locus::openai::request_fields
