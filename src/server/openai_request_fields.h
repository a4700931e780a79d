// Typed, non-throwing readers of OpenAI request JSON, as strict as vLLM's pydantic models: each
// failure is a 400 ApiError naming the field. Internal to the request parsers; never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai_protocol.h"

namespace locus::openai::request_fields {

using Json = nlohmann::ordered_json;
using Error = std::optional<ApiError>;  // nullopt: the field was fine (or absent)

ApiError bad_request(std::string message, std::string param = {});

// The body as a JSON object; not JSON, not an object, invalid UTF-8 or nested too deeply: 400.
ApiResult<Json> parse_body(std::string_view body);

// The value of `key`, or nullptr when absent or null (pydantic's Optional: null means unset).
const Json* find_field(const Json& object, const std::string& key);

// Pydantic's lax integer: JSON integers and floats without a fractional part (2.0), never bools
// or strings; values outside the target type are 400, not wrapped.
Error to_int64(const Json& value, const std::string& param, int64_t& out);
Error to_int(const Json& value, const std::string& param, int& out);

// Field readers: leave `out` unchanged when the field is absent or null. `prefix` names the
// enclosing object in the param ("stream_options" -> "stream_options.include_usage").
Error get_int(const Json& object, const std::string& key, std::optional<int>& out,
              std::string_view prefix = {});
Error get_int(const Json& object, const std::string& key, int& out);
Error get_float(const Json& object, const std::string& key, float& out);
Error get_bool(const Json& object, const std::string& key, bool& out, std::string_view prefix = {});
Error get_string(const Json& object, const std::string& key, std::optional<std::string>& out);
Error get_int32_list(const Json& object, const std::string& key, std::vector<int32_t>& out);
Error get_object(const Json& object, const std::string& key, Json& out);

}  // namespace locus::openai::request_fields
