// JSON in and out of the interpreter: request JSON becomes Python-like values (objects keep their
// key order, as Python dicts do, so inputs must be nlohmann::ordered_json), and `tojson` writes
// exactly what Python's json.dumps writes with the options transformers exposes.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

Value value_from_json(const nlohmann::ordered_json& json);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // absent: one line; present: newline + indent per level
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(value, ...). Throws TemplateError(kType) for values JSON cannot hold (Undefined,
// namespaces, generators), with Python's message "Object of type X is not JSON serializable".
std::string dump_json(const Value& value, const JsonDumpOptions& options);

}  // namespace locus::jinja
