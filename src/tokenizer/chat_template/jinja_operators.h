// Python semantics of the operators and protocols templates use: arithmetic (+ - * / // % **),
// ordering, `in`, len(), iteration, slicing and `str % args` formatting, with Python's errors
// ("can only concatenate str (not "int") to str") and jinja2's Undefined behaviour.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tokenizer/chat_template/jinja_ast.h"
#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

// Raises what using an undefined value raises: UndefinedError with its hint, or a security
// error for an attribute the sandbox blocked.
[[noreturn]] void raise_undefined(const Value& undefined);

// Arithmetic operators (not and/or, which the evaluator short-circuits).
Value binary_operation(BinaryOp op, const Value& left, const Value& right);
Value negate(const Value& value);
Value unary_plus(const Value& value);

// ==, !=, <, ... and `in` / `not in`. Ordering of unorderable types raises TypeError.
bool compare(CompareOp op, const Value& left, const Value& right);
bool python_less(const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

// len(x); TypeError for values without a length (generators, numbers, None).
size_t python_len(const Value& value);
// iter(x) drained into a vector: list/tuple items, dict keys, string characters; consumes a
// generator; Undefined iterates as empty. TypeError for non-iterables.
std::vector<Value> iterate(const Value& value);
// The characters of a string as one-character strings.
std::vector<Value> string_characters(const std::string& s);

// x[start:stop:step] for str, list and tuple; each bound may be None/absent.
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);

// `format % args`: printf-style formatting with a tuple, a mapping or a single value.
std::string percent_format(const std::string& format, const Value& args);

// A hashable dict key (str, number, None, tuple of hashables); TypeError otherwise.
void check_hashable(const Value& key);

}  // namespace locus::jinja
