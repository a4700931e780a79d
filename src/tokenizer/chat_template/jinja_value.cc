// Value: construction, Python truthiness, equality and str()/repr() (see jinja_value.h).
#include "tokenizer/chat_template/jinja_value.h"

#include <cmath>

#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

bool is_string_key(const Value& key, std::string_view text) {
  return key.is_string() && key.as_string() == text;
}

// Exact comparison of an integer with a double, as Python does (no rounding of the int).
bool int_equals_double(int64_t i, double d) {
  if (std::isnan(d) || std::isinf(d) || d != std::floor(d)) return false;
  if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) return false;
  return static_cast<int64_t>(d) == i;
}

std::string join_reprs(const std::vector<Value>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i].repr();
  }
  return out;
}

std::string dict_repr(const DictValue& dict) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : dict.entries()) {
    if (!first) out += ", ";
    first = false;
    out += key.repr() + ": " + value.repr();
  }
  return out + "}";
}

}  // namespace

const Value* DictValue::find(std::string_view key) const {
  for (const auto& entry : entries_) {
    if (is_string_key(entry.first, key)) return &entry.second;
  }
  return nullptr;
}

const Value* DictValue::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& entry : entries_) {
    if (python_equals(entry.first, key)) return &entry.second;
  }
  return nullptr;
}

void DictValue::set(Value key, Value value) {
  for (auto& entry : entries_) {
    if (python_equals(entry.first, key)) {
      entry.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

void DictValue::insert_new(Value key, Value value) {
  entries_.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string hint, bool is_unsafe) {
  Value v;
  v.data_ = UndefinedValue{std::move(hint), is_unsafe};
  return v;
}

Value Value::list(std::vector<Value> items) {
  Value v;
  v.data_ = std::make_shared<const ListValue>(ListValue{std::move(items), false});
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v;
  v.data_ = std::make_shared<const ListValue>(ListValue{std::move(items), true});
  return v;
}

Value Value::dict(DictValue dict) {
  Value v;
  v.data_ = std::make_shared<const DictValue>(std::move(dict));
  return v;
}

Value Value::iterator(std::string type_name, std::vector<Value> items, bool is_view) {
  Value v;
  v.data_ = std::make_shared<IteratorValue>(
      IteratorValue{std::move(type_name), std::move(items), 0, is_view});
  return v;
}

Value Value::object(std::shared_ptr<ObjectValue> object) {
  Value v;
  v.data_ = std::move(object);
  return v;
}

Value Value::callable(std::string name, NativeFunction function) {
  Value v;
  v.data_ =
      std::make_shared<const CallableValue>(CallableValue{std::move(name), std::move(function)});
  return v;
}

ValueKind Value::kind() const {
  switch (data_.index()) {
    case 0:
      return ValueKind::kUndefined;
    case 1:
      return ValueKind::kNone;
    case 2:
      return ValueKind::kBool;
    case 3:
      return ValueKind::kInt;
    case 4:
      return ValueKind::kFloat;
    case 5:
      return ValueKind::kString;
    case 6:
      return ValueKind::kList;
    case 7:
      return ValueKind::kDict;
    case 8:
      return ValueKind::kIterator;
    case 9:
      return ValueKind::kObject;
    default:
      return ValueKind::kCallable;
  }
}

double Value::to_double() const {
  if (is_float()) return as_float();
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  return static_cast<double>(as_int());
}

int64_t Value::to_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return as_int();
}

bool Value::truthy() const {
  switch (kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return as_bool();
    case ValueKind::kInt:
      return as_int() != 0;
    case ValueKind::kFloat:
      return as_float() != 0.0;
    case ValueKind::kString:
      return !as_string().empty();
    case ValueKind::kList:
      return !as_list().empty();
    case ValueKind::kDict:
      return !as_dict().empty();
    case ValueKind::kIterator: {
      const IteratorValue& it = as_iterator();
      return it.is_view ? !it.items.empty() : true;
    }
    case ValueKind::kObject:
    case ValueKind::kCallable:
      return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind()) {
    case ValueKind::kUndefined:
      return "Undefined";
    case ValueKind::kNone:
      return "NoneType";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return "str";
    case ValueKind::kList:
      return is_tuple() ? "tuple" : "list";
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kIterator:
      return as_iterator().type_name;
    case ValueKind::kObject:
      return as_object().type_name;
    case ValueKind::kCallable:
      return "function";
  }
  return "object";
}

std::string Value::str() const {
  switch (kind()) {
    case ValueKind::kUndefined:
      return "";
    case ValueKind::kString:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case ValueKind::kUndefined:
      return "Undefined";
    case ValueKind::kNone:
      return "None";
    case ValueKind::kBool:
      return as_bool() ? "True" : "False";
    case ValueKind::kInt:
      return std::to_string(as_int());
    case ValueKind::kFloat:
      return text::float_repr(as_float());
    case ValueKind::kString:
      return text::repr(as_string());
    case ValueKind::kList: {
      const auto& items = as_list();
      if (!is_tuple()) return "[" + join_reprs(items) + "]";
      return "(" + join_reprs(items) + (items.size() == 1 ? ",)" : ")");
    }
    case ValueKind::kDict:
      return dict_repr(as_dict());
    case ValueKind::kIterator: {
      const IteratorValue& it = as_iterator();
      if (!it.is_view) return "<" + it.type_name + " object at 0x7f0000000000>";
      return it.type_name + "([" + join_reprs(it.items) + "])";
    }
    case ValueKind::kObject: {
      const ObjectValue& object = as_object();
      if (object.is_namespace) return "<Namespace " + dict_repr(object.attributes) + ">";
      if (object.type_name == "LoopContext") {
        const Value* index = object.attributes.find("index");
        const Value* length = object.attributes.find("length");
        if (index != nullptr && length != nullptr) {
          return "<LoopContext " + index->str() + "/" + length->str() + ">";
        }
      }
      return "<" + object.type_name + " object>";
    }
    case ValueKind::kCallable:
      return "<" + as_callable().name + ">";
  }
  return "";
}

bool Value::is_same(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case ValueKind::kList:
      return &list_value() == &other.list_value();
    case ValueKind::kDict:
      return &as_dict() == &other.as_dict();
    case ValueKind::kIterator:
      return &as_iterator() == &other.as_iterator();
    case ValueKind::kObject:
      return &as_object() == &other.as_object();
    case ValueKind::kCallable:
      return &as_callable() == &other.as_callable();
    default:
      return python_equals(*this, other);
  }
}

bool python_equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) return a.to_int() == b.to_int();
    if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
    if (a.is_float()) return int_equals_double(b.to_int(), a.as_float());
    return int_equals_double(a.to_int(), b.as_float());
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return true;
    case ValueKind::kString:
      return a.as_string() == b.as_string();
    case ValueKind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!python_equals(x[i], y[i])) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      const DictValue& x = a.as_dict();
      const DictValue& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.find(key);
        if (other == nullptr || !python_equals(value, *other)) return false;
      }
      return true;
    }
    default:
      return a.is_same(b);
  }
}

}  // namespace locus::jinja
