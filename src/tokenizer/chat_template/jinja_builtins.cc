// Global functions available to templates (see jinja_builtins.h).
#include "tokenizer/chat_template/jinja_builtins.h"

#include <ctime>
#include <memory>

#include "tokenizer/chat_template/jinja_arguments.h"
#include "tokenizer/chat_template/jinja_evaluator.h"
#include "tokenizer/chat_template/jinja_operators.h"

namespace locus::jinja {
namespace {

Value builtin_range(Evaluator&, CallArguments& args) {
  if (!args.keyword.empty()) throw_type_error("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3)
    throw_type_error("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  auto as_int = [](const Value& v) {
    if (v.is_int() || v.is_bool()) return v.to_int();
    throw_type_error("'" + v.type_name() + "' object cannot be interpreted as an integer");
  };
  int64_t start = p.size() == 1 ? 0 : as_int(p[0]);
  int64_t stop = as_int(p.size() == 1 ? p[0] : p[1]);
  int64_t step = p.size() == 3 ? as_int(p[2]) : 1;
  if (step == 0) throw_type_error("ValueError: range() arg 3 must not be zero");
  // Count in unsigned arithmetic so that extreme bounds cannot overflow.
  uint64_t count = 0;
  if ((step > 0 && start < stop) || (step < 0 && start > stop)) {
    uint64_t distance = step > 0 ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                                 : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
    uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
    count = (distance - 1) / magnitude + 1;
  }
  if (count > static_cast<uint64_t>(kMaxRange)) {
    throw TemplateError(TemplateErrorKind::kLimit,
                        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  std::vector<Value> items;
  items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    items.emplace_back(
        static_cast<int64_t>(static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step)));
  }
  return Value::list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs), also behind namespace().
DictValue build_dict(const CallArguments& args, const char* name) {
  if (args.positional.size() > 1)
    throw_type_error(std::string(name) + " expected at most 1 argument");
  DictValue dict;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      dict = source.as_dict();
    } else if (source.is_object()) {
      dict = source.as_object().attributes;
    } else {
      for (const Value& pair : iterate(source)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) {
          throw_type_error("ValueError: dictionary update sequence element has length " +
                           std::to_string(kv.size()) + "; 2 is required");
        }
        check_hashable(kv[0]);
        dict.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [key, value] : args.keyword)
    dict.set(Value(key), value);
  return dict;
}

Value builtin_dict(Evaluator&, CallArguments& args) {
  return Value::dict(build_dict(args, "dict"));
}

Value builtin_namespace(Evaluator&, CallArguments& args) {
  auto object = std::make_shared<ObjectValue>();
  object->type_name = "Namespace";
  object->is_namespace = true;
  object->attributes = build_dict(args, "namespace");
  return Value::object(std::move(object));
}

Value builtin_raise_exception(Evaluator&, CallArguments& args) {
  BoundArguments b("raise_exception", args, {"message"});
  throw TemplateError(TemplateErrorKind::kRaised, b.require(0, "message").str());
}

// transformers: datetime.now().strftime(format), in the server's local time zone.
Value builtin_strftime_now(Evaluator& evaluator, CallArguments& args) {
  BoundArguments b("strftime_now", args, {"format"});
  const std::string& format = require_string(b.require(0, "format"), "strftime() argument 1");
  std::time_t now = evaluator.now();
  std::tm local{};
  localtime_r(&now, &local);
  if (format.empty()) return Value("");
  for (size_t size = 256; size <= (size_t{1} << 20); size *= 4) {
    std::string buffer(size, '\0');
    // The format comes from the template by design (strftime_now's whole purpose).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &local);
#pragma GCC diagnostic pop
    if (n > 0) {
      buffer.resize(n);
      return Value(std::move(buffer));
    }
  }
  return Value("");  // strftime produced nothing, as it does for formats that expand to ""
}

Value builtin_joiner(Evaluator&, CallArguments& args) {
  BoundArguments b("joiner", args, {"sep"});
  std::string separator = b.get(0, Value(", ")).str();
  auto used = std::make_shared<bool>(false);
  return Value::callable("joiner", [separator, used](Evaluator&, CallArguments& call_args) {
    BoundArguments("joiner", call_args, {});
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(separator);
  });
}

}  // namespace

std::unordered_map<std::string, Value> make_builtins() {
  return {
      {"range", Value::callable("range", builtin_range)},
      {"dict", Value::callable("dict", builtin_dict)},
      {"namespace", Value::callable("namespace", builtin_namespace)},
      {"raise_exception", Value::callable("function raise_exception", builtin_raise_exception)},
      {"strftime_now", Value::callable("function strftime_now", builtin_strftime_now)},
      {"joiner", Value::callable("joiner", builtin_joiner)},
  };
}

}  // namespace locus::jinja
