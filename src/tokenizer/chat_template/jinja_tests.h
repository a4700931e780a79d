// The tests (`value is name(args)`) of jinja2's default environment: defined, none, string,
// mapping, iterable, sequence, number, integer, boolean, true/false, odd/even, divisibleby, in,
// eq/ne/lt/gt (and their aliases), lower/upper, callable, sameas, filter/test.
#pragma once

#include <string_view>

#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

using TestFunction = bool (*)(Evaluator& evaluator, const Value& input, CallArguments& args);

// nullptr when there is no test of that name.
const TestFunction* find_test(std::string_view name);

}  // namespace locus::jinja
