// JSON conversion and Python json.dumps formatting (see jinja_json.h).
#include "tokenizer/chat_template/jinja_json.h"

#include <algorithm>
#include <cmath>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

constexpr int kMaxJsonDepth = 512;

void append_hex4(std::string& out, unsigned value) {
  static const char* kHex = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4)
    out.push_back(kHex[(value >> shift) & 0xF]);
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : text::decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          append_hex4(out, c);
        } else if (ensure_ascii && c > 0x7F) {
          if (c >= 0x10000) {
            char32_t v = c - 0x10000;
            append_hex4(out, 0xD800 | (v >> 10));
            append_hex4(out, 0xDC00 | (v & 0x3FF));
          } else {
            append_hex4(out, c);
          }
        } else {
          text::append_utf8(out, c);
        }
    }
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return text::float_repr(d);
}

[[noreturn]] void not_serializable(const Value& value) {
  throw_type_error("Object of type " + value.type_name() + " is not JSON serializable");
}

// Dict keys become strings the way json.dumps converts them.
std::string key_text(const Value& key) {
  switch (key.kind()) {
    case ValueKind::kString:
      return key.as_string();
    case ValueKind::kBool:
      return key.as_bool() ? "true" : "false";
    case ValueKind::kInt:
      return std::to_string(key.as_int());
    case ValueKind::kFloat:
      return json_float(key.as_float());
    case ValueKind::kNone:
      return "null";
    default:
      throw_type_error("keys must be str, int, float, bool or None, not " + key.type_name());
  }
}

bool key_less(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_number() && b.is_number()) return a.to_double() < b.to_double();
  throw_type_error("'<' not supported between instances of '" + b.type_name() + "' and '" +
                   a.type_name() + "'");
}

class JsonWriter {
 public:
  JsonWriter(const JsonDumpOptions& options, std::string& out) : options_(options), out_(out) {}

  void write(const Value& value, int depth) {
    if (depth > kMaxJsonDepth) throw_type_error("tojson: value nested too deeply");
    switch (value.kind()) {
      case ValueKind::kNone:
        out_ += "null";
        return;
      case ValueKind::kBool:
        out_ += value.as_bool() ? "true" : "false";
        return;
      case ValueKind::kInt:
        out_ += std::to_string(value.as_int());
        return;
      case ValueKind::kFloat:
        out_ += json_float(value.as_float());
        return;
      case ValueKind::kString:
        append_json_string(out_, value.as_string(), options_.ensure_ascii);
        return;
      case ValueKind::kList:
        write_list(value.as_list(), depth);
        return;
      case ValueKind::kDict:
        write_dict(value.as_dict(), depth);
        return;
      default:
        not_serializable(value);
    }
  }

 private:
  void newline(int depth) {
    if (!options_.indent) return;
    out_.push_back('\n');
    for (int i = 0; i < depth; ++i)
      out_ += *options_.indent;
  }

  void write_list(const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += options_.item_separator;
      newline(depth + 1);
      write(items[i], depth + 1);
    }
    newline(depth);
    out_.push_back(']');
  }

  void write_dict(const DictValue& dict, int depth) {
    if (dict.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : dict.entries())
      entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return key_less(a->first, b->first); });
    }
    out_.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += options_.item_separator;
      newline(depth + 1);
      append_json_string(out_, key_text(entries[i]->first), options_.ensure_ascii);
      out_ += options_.key_separator;
      write(entries[i]->second, depth + 1);
    }
    newline(depth);
    out_.push_back('}');
  }

  const JsonDumpOptions& options_;
  std::string& out_;
};

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = json.get<uint64_t>();
      // Python would keep an exact big integer; past int64 we keep the nearest double.
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(json.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json)
        items.push_back(value_from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictValue dict;
      for (const auto& [key, item] : json.items()) {
        dict.insert_new(Value(key), value_from_json(item));
      }
      return Value::dict(std::move(dict));
    }
    case nlohmann::ordered_json::value_t::binary:
      return Value::none();
  }
  return Value::none();
}

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  JsonWriter(options, out).write(value, 0);
  return out;
}

}  // namespace locus::jinja
