// The values a Jinja template computes with, modelled on the Python objects Jinja2 sees when
// transformers renders a chat template: None, bool, int, float, str, list, tuple, dict
// (insertion-ordered), iterators (generators, dict views), namespaces/objects, callables and
// jinja2's Undefined. Lists, dicts and strings are immutable once built (the template sandbox
// forbids mutation), so copies share storage; only namespace objects are mutable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace locus::jinja {

class Value;
class Evaluator;
struct CallArguments;

enum class ValueKind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list or tuple (ListValue::is_tuple)
  kDict,
  kIterator,  // a one-pass generator or a dict view
  kObject,    // namespace(), loop, cycler, joiner
  kCallable,
};

struct UndefinedValue {
  // What to say when the undefined value is used in a way that needs a value:
  // "'x' is undefined", "'dict object' has no attribute 'content'".
  std::string hint;
  bool is_unsafe = false;  // a sandbox-blocked attribute: using it is a security error
};

struct ListValue {
  std::vector<Value> items;
  bool is_tuple = false;
};

// A Python dict: insertion-ordered, keys compared with Python equality (1 == 1.0 == True).
class DictValue {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  // Inserts or overwrites, keeping the first insertion position like Python.
  void set(Value key, Value value);
  // Appends a key known not to be present yet (JSON object keys), skipping the O(n) search.
  void insert_new(Value key, Value value);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
};

// Generators (select, map, items...) and dict views (keys(), values(), items()).
struct IteratorValue {
  std::string type_name;  // "generator", "dict_items", "list_reverseiterator"...
  std::vector<Value> items;
  size_t position = 0;   // generators are consumed by iteration, like Python's
  bool is_view = false;  // dict views: len() works, they are reusable and falsy when empty
};

// An object with attributes: namespace(), the loop variable, cycler(), joiner().
struct ObjectValue {
  std::string type_name;  // "Namespace", "LoopContext"
  DictValue attributes;
  bool is_namespace = false;  // only namespaces accept `{% set ns.attr = ... %}`
};

using NativeFunction = std::function<Value(Evaluator&, CallArguments&)>;

struct CallableValue {
  std::string name;  // for messages: "macro 'render'", "range"
  NativeFunction function;
};

class Value {
 public:
  Value() : data_(UndefinedValue{}) {}
  Value(bool b) : data_(b) {}                           // NOLINT: implicit like Python literals
  Value(int64_t i) : data_(i) {}                        // NOLINT
  Value(int i) : data_(static_cast<int64_t>(i)) {}      // NOLINT
  Value(double d) : data_(d) {}                         // NOLINT
  Value(std::string s) : data_(std::move(s)) {}         // NOLINT
  Value(std::string_view s) : data_(std::string(s)) {}  // NOLINT
  Value(const char* s) : data_(std::string(s)) {}       // NOLINT

  static Value undefined(std::string hint = "", bool is_unsafe = false);
  static Value none() { return Value(NoneTag{}); }
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict(DictValue dict);
  static Value iterator(std::string type_name, std::vector<Value> items, bool is_view);
  static Value object(std::shared_ptr<ObjectValue> object);
  static Value callable(std::string name, NativeFunction function);

  ValueKind kind() const;
  bool is_undefined() const { return kind() == ValueKind::kUndefined; }
  bool is_none() const { return kind() == ValueKind::kNone; }
  bool is_bool() const { return kind() == ValueKind::kBool; }
  bool is_int() const { return kind() == ValueKind::kInt; }
  bool is_float() const { return kind() == ValueKind::kFloat; }
  // bool, int or float: the things Python arithmetic accepts.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind() == ValueKind::kString; }
  bool is_list() const { return kind() == ValueKind::kList; }  // list or tuple
  bool is_tuple() const { return is_list() && list_value().is_tuple; }
  bool is_dict() const { return kind() == ValueKind::kDict; }
  bool is_iterator() const { return kind() == ValueKind::kIterator; }
  bool is_object() const { return kind() == ValueKind::kObject; }
  bool is_callable() const { return kind() == ValueKind::kCallable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  // int, bool or float as a double / bool or int as an int64 (caller checks the kind).
  double to_double() const;
  int64_t to_int() const;
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const std::vector<Value>& as_list() const { return list_value().items; }
  const ListValue& list_value() const { return *std::get<std::shared_ptr<const ListValue>>(data_); }
  const DictValue& as_dict() const { return *std::get<std::shared_ptr<const DictValue>>(data_); }
  IteratorValue& as_iterator() const { return *std::get<std::shared_ptr<IteratorValue>>(data_); }
  ObjectValue& as_object() const { return *std::get<std::shared_ptr<ObjectValue>>(data_); }
  const CallableValue& as_callable() const {
    return *std::get<std::shared_ptr<const CallableValue>>(data_);
  }
  const UndefinedValue& as_undefined() const { return std::get<UndefinedValue>(data_); }

  // Python truthiness: bool(x).
  bool truthy() const;
  // Python's type name, as used in error messages: 'int', 'str', 'NoneType', 'dict'...
  std::string type_name() const;
  // str(x) / repr(x), with Python's formatting (True, None, 1.0, ['a'], {'k': 1}).
  std::string str() const;
  std::string repr() const;
  // The same object (Python `is`): identity for containers, equality for scalars.
  bool is_same(const Value& other) const;

 private:
  struct NoneTag {};
  explicit Value(NoneTag) : data_(NoneTag{}) {}

  std::variant<UndefinedValue, NoneTag, bool, int64_t, double, std::string,
               std::shared_ptr<const ListValue>, std::shared_ptr<const DictValue>,
               std::shared_ptr<IteratorValue>, std::shared_ptr<ObjectValue>,
               std::shared_ptr<const CallableValue>>
      data_;
};

// Python `==` (never raises): numbers by value across bool/int/float, containers element-wise,
// Undefined equal only to Undefined.
bool python_equals(const Value& a, const Value& b);

// Positional and keyword arguments of one call, as evaluated.
struct CallArguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

}  // namespace locus::jinja
