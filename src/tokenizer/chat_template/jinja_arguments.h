// Binds a call's positional and keyword arguments to a Python-style parameter list, with
// Python's errors for unexpected or duplicate arguments. Used by filters, tests, methods and
// builtin functions.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

class BoundArguments {
 public:
  // `names`: the parameters in order. Positional arguments beyond them are an error unless
  // `rest` is given, which then receives them (Python's *args).
  BoundArguments(std::string_view function, const CallArguments& args,
                 std::initializer_list<std::string_view> names, std::vector<Value>* rest = nullptr)
      : function_(function), values_(names.size()) {
    std::vector<std::string_view> ordered(names);
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < ordered.size()) {
        values_[i] = args.positional[i];
      } else if (rest != nullptr) {
        rest->push_back(args.positional[i]);
      } else {
        throw_type_error(function_ + "() takes at most " + std::to_string(ordered.size()) +
                         " argument(s) (" + std::to_string(args.positional.size()) + " given)");
      }
    }
    for (const auto& [key, value] : args.keyword) {
      size_t index = ordered.size();
      for (size_t i = 0; i < ordered.size(); ++i) {
        if (ordered[i] == key) index = i;
      }
      if (index == ordered.size()) {
        throw_type_error(function_ + "() got an unexpected keyword argument '" + key + "'");
      }
      if (values_[index]) {
        throw_type_error(function_ + "() got multiple values for argument '" + key + "'");
      }
      values_[index] = value;
    }
  }

  bool has(size_t i) const { return values_[i].has_value(); }
  // The argument, or `fallback` when it was not passed.
  Value get(size_t i, Value fallback = Value::none()) const {
    return values_[i] ? *values_[i] : std::move(fallback);
  }
  const Value& require(size_t i, std::string_view name) const {
    if (!values_[i]) {
      throw_type_error(function_ + "() missing required argument '" + std::string(name) + "'");
    }
    return *values_[i];
  }

 private:
  std::string function_;
  std::vector<std::optional<Value>> values_;
};

// Argument-type helpers with Python-flavoured errors.
inline int64_t require_int(const Value& v, std::string_view what) {
  if (v.is_int() || v.is_bool()) return v.to_int();
  throw_type_error(std::string(what) + ": '" + v.type_name() +
                   "' object cannot be interpreted as an integer");
}

inline const std::string& require_string(const Value& v, std::string_view what) {
  if (v.is_string()) return v.as_string();
  throw_type_error(std::string(what) + " must be str, not " + v.type_name());
}

}  // namespace locus::jinja
