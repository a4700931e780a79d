// Python methods of dict, list and tuple called from templates (`message.get('name')`,
// `tools.items()`), and the dispatch of `x.method` for every type. Methods that would mutate a
// container are refused the way ImmutableSandboxedEnvironment refuses them.
#include <functional>
#include <unordered_map>

#include "tokenizer/chat_template/jinja_arguments.h"
#include "tokenizer/chat_template/jinja_attributes.h"
#include "tokenizer/chat_template/jinja_operators.h"

namespace locus::jinja {
namespace {

using ContainerMethod = std::function<Value(const Value&, const CallArguments&)>;

Value dict_view(const DictValue& dict, const std::string& kind) {
  std::vector<Value> items;
  items.reserve(dict.size());
  for (const auto& [key, value] : dict.entries()) {
    if (kind == "dict_keys")
      items.push_back(key);
    else if (kind == "dict_values")
      items.push_back(value);
    else
      items.push_back(Value::tuple({key, value}));
  }
  return Value::iterator(kind, std::move(items), true);
}

const std::unordered_map<std::string, ContainerMethod>& dict_methods() {
  static const auto* methods = new std::unordered_map<std::string, ContainerMethod>{
      {"get",
       [](const Value& d, const CallArguments& a) {
         BoundArguments b("get", a, {"key", "default"});
         const Value& key = b.require(0, "key");
         check_hashable(key);
         const Value* found = d.as_dict().find(key);
         return found != nullptr ? *found : b.get(1);
       }},
      {"items",
       [](const Value& d, const CallArguments& a) {
         BoundArguments("items", a, {});
         return dict_view(d.as_dict(), "dict_items");
       }},
      {"keys",
       [](const Value& d, const CallArguments& a) {
         BoundArguments("keys", a, {});
         return dict_view(d.as_dict(), "dict_keys");
       }},
      {"values",
       [](const Value& d, const CallArguments& a) {
         BoundArguments("values", a, {});
         return dict_view(d.as_dict(), "dict_values");
       }},
      {"copy",
       [](const Value& d, const CallArguments& a) {
         BoundArguments("copy", a, {});
         return Value::dict(d.as_dict());
       }},
  };
  return *methods;
}

const std::unordered_map<std::string, ContainerMethod>& sequence_methods() {
  static const auto* methods = new std::unordered_map<std::string, ContainerMethod>{
      {"count",
       [](const Value& l, const CallArguments& a) {
         const Value x = BoundArguments("count", a, {"value"}).require(0, "value");
         int64_t n = 0;
         for (const Value& item : l.as_list())
           n += python_equals(item, x) ? 1 : 0;
         return Value(n);
       }},
      {"index",
       [](const Value& l, const CallArguments& a) {
         const Value x = BoundArguments("index", a, {"value"}).require(0, "value");
         const auto& items = l.as_list();
         for (size_t i = 0; i < items.size(); ++i) {
           if (python_equals(items[i], x)) return Value(static_cast<int64_t>(i));
         }
         throw_type_error("ValueError: " + (l.is_tuple()
                                                ? std::string("tuple.index(x): x not in tuple")
                                                : x.repr() + " is not in list"));
       }},
      {"copy",
       [](const Value& l, const CallArguments& a) {
         BoundArguments("copy", a, {});
         return Value::list(l.as_list());
       }},
  };
  return *methods;
}

Value bind(const Value& object, const std::string& name, ContainerMethod method) {
  return Value::callable("built-in method " + name + " of " + object.type_name() + " object",
                         [object, method = std::move(method)](Evaluator&, CallArguments& args) {
                           return method(object, args);
                         });
}

Value unsafe(const Value& object, const std::string& name) {
  return Value::undefined(
      "access to attribute '" + name + "' of '" + object.type_name() + "' object is unsafe.", true);
}

}  // namespace

std::optional<Value> find_method(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case ValueKind::kString:
      return find_string_method(object, name);
    case ValueKind::kDict: {
      auto it = dict_methods().find(name);
      if (it != dict_methods().end()) return bind(object, name, it->second);
      if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
          name == "clear" || name == "fromkeys") {
        return unsafe(object, name);
      }
      return std::nullopt;
    }
    case ValueKind::kList: {
      auto it = sequence_methods().find(name);
      if (it != sequence_methods().end() && !(object.is_tuple() && name == "copy"))
        return bind(object, name, it->second);
      if (!object.is_tuple() &&
          (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
           name == "remove" || name == "reverse" || name == "sort" || name == "clear")) {
        return unsafe(object, name);
      }
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace locus::jinja
