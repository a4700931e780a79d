// Python string formatting for templates: `"%s-%d" % (a, b)` (printf style, in
// jinja_operators.h as percent_format) and `"{} {name}".format(...)` with the common parts of
// the format-spec mini-language (fill, align, sign, width, precision, s/d/f/e/g/x/o/b/%).
#pragma once

#include <string>

#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

// str.format(*args, **kwargs). Throws TemplateError(kType) like Python's ValueError/KeyError.
std::string brace_format(const std::string& format, const CallArguments& args);

// format(value, spec): one value through the format-spec mini-language.
std::string format_with_spec(const Value& value, const std::string& spec);

}  // namespace locus::jinja
