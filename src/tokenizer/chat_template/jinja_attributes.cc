// Attribute and item lookup with jinja2's sandboxed rules (see jinja_attributes.h).
#include "tokenizer/chat_template/jinja_attributes.h"

#include "tokenizer/chat_template/jinja_operators.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus::jinja {
namespace {

Value missing_attribute(const Value& object, const std::string& name) {
  return Value::undefined(text::repr(object_type_repr(object)) + " has no attribute " +
                          text::repr(name));
}

Value missing_element(const Value& object, const Value& key) {
  return Value::undefined(object_type_repr(object) + " has no element " + key.repr());
}

Value unsafe_attribute(const Value& object, const std::string& name) {
  return Value::undefined("access to attribute " + text::repr(name) + " of " +
                              text::repr(object.type_name()) + " object is unsafe.",
                          true);
}

}  // namespace

std::optional<Value> python_attribute(const Value& object, const std::string& name) {
  if (name.rfind("__", 0) == 0) {
    // Dunder attributes exist on every Python object and the sandbox refuses them all.
    return unsafe_attribute(object, name);
  }
  if (std::optional<Value> method = find_method(object, name)) return method;
  if (object.is_object()) {
    if (const Value* v = object.as_object().attributes.find(name)) return *v;
  }
  return std::nullopt;
}

namespace {

// Python object[key]; nullopt when it raises (TypeError, KeyError, IndexError).
std::optional<Value> python_item(const Value& object, const Value& key) {
  switch (object.kind()) {
    case ValueKind::kDict: {
      bool unhashable = (key.is_list() && !key.is_tuple()) || key.is_dict() || key.is_object();
      if (unhashable) return std::nullopt;  // Python raises TypeError, jinja2 yields Undefined
      if (const Value* v = object.as_dict().find(key)) return *v;
      return std::nullopt;
    }
    case ValueKind::kList:
    case ValueKind::kString: {
      if (!key.is_int() && !key.is_bool()) return std::nullopt;
      int64_t index = key.to_int();
      if (object.is_list()) {
        int64_t size = static_cast<int64_t>(object.as_list().size());
        if (index < 0) index += size;
        if (index < 0 || index >= size) return std::nullopt;
        return object.as_list()[static_cast<size_t>(index)];
      }
      const std::string& s = object.as_string();
      std::vector<size_t> offsets = text::code_point_offsets(s);
      int64_t size = static_cast<int64_t>(offsets.size()) - 1;
      if (index < 0) index += size;
      if (index < 0 || index >= size) return std::nullopt;
      size_t k = static_cast<size_t>(index);
      return Value(s.substr(offsets[k], offsets[k + 1] - offsets[k]));
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string object_type_repr(const Value& object) {
  switch (object.kind()) {
    case ValueKind::kNone:
      return "None";
    case ValueKind::kUndefined:
      return "jinja2.runtime.Undefined object";
    case ValueKind::kObject:
      if (object.as_object().is_namespace) return "jinja2.utils.Namespace object";
      return "jinja2.runtime." + object.as_object().type_name + " object";
    default:
      return object.type_name() + " object";
  }
}

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) raise_undefined(object);
  if (std::optional<Value> attribute = python_attribute(object, name)) return *attribute;
  if (std::optional<Value> item = python_item(object, Value(name))) return *item;
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) raise_undefined(object);
  if (std::optional<Value> item = python_item(object, key)) return *item;
  if (key.is_string()) {
    if (std::optional<Value> attribute = python_attribute(object, key.as_string()))
      return *attribute;
    return missing_attribute(object, key.as_string());
  }
  return missing_element(object, key);
}

}  // namespace locus::jinja
