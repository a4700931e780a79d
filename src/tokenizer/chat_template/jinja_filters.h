// The filters (`value | name(args)`) of jinja2's default environment that chat templates use,
// plus transformers' own `tojson` (json.dumps with ensure_ascii=False and indent/sort_keys/
// separators options). Unknown names are rejected by the parser, as jinja2 rejects them when it
// compiles a template.
#pragma once

#include <string_view>

#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

using FilterFunction = Value (*)(Evaluator& evaluator, const Value& input, CallArguments& args);

// nullptr when there is no filter of that name.
const FilterFunction* find_filter(std::string_view name);

}  // namespace locus::jinja
