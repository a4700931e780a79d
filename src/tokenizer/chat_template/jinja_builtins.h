// The global functions a chat template can call: jinja2's range, dict, namespace and joiner,
// and the two transformers adds, raise_exception(message) and strftime_now(format).
#pragma once

#include <string>
#include <unordered_map>

#include "tokenizer/chat_template/jinja_value.h"

namespace locus::jinja {

// Fresh per render: joiner() objects keep state.
std::unordered_map<std::string, Value> make_builtins();

// The most items range() may produce, as jinja2's sandbox limits it.
constexpr int64_t kMaxRange = 100000;

}  // namespace locus::jinja
