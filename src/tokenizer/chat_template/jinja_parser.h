// Builds the syntax tree from tokens with jinja2's grammar and operator precedence
// (jinja2/parser.py), including the loopcontrols extension (break/continue) and transformers'
// `{% generation %}` tag. Filter and test names are checked here, as jinja2 does when compiling.
#pragma once

#include <string_view>

#include "tokenizer/chat_template/jinja_ast.h"

namespace locus::jinja {

// Throws TemplateError(kSyntax) with a line number.
Body parse_template(std::string_view source);

}  // namespace locus::jinja
