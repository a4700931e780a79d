// `x.name` and `x[key]` with jinja2's rules under the immutable sandbox: attribute access tries
// the Python attribute (a method such as dict.items) before the item, subscription tries the item
// before the attribute, a miss yields Undefined carrying jinja2's message, and mutating or private
// attributes yield an "unsafe" Undefined that raises a security error when used.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

Value get_attribute(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& key);

// "'dict object'", "None", "'jinja2.utils.Namespace object'": how jinja2 names the object an
// attribute was missing from.
std::string object_type_repr(const Value& object);

// Python getattr(object, name) under the sandbox: a bound method, a namespace/loop attribute, or
// an unsafe Undefined for dunder names; nullopt when the object has no such attribute.
std::optional<Value> python_attribute(const Value& object, const std::string& name);

// The Python method `name` of `object` bound to it, or nullopt when the type has no such method.
// Defined in jinja_methods.cc.
std::optional<Value> find_method(const Value& object, const std::string& name);
// The same for a str object; defined in jinja_string_methods.cc.
std::optional<Value> find_string_method(const Value& object, const std::string& name);

}  // namespace locus::jinja
