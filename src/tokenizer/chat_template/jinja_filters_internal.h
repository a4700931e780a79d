// Shared by the filter implementation files only: the registry they fill and helpers they share.
#pragma once

#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/chat_template/jinja_filters.h"

namespace locus::jinja {

using FilterTable = std::unordered_map<std::string_view, FilterFunction>;

void register_text_filters(FilterTable& table);      // jinja_filters.cc
void register_sequence_filters(FilterTable& table);  // jinja_filters_sequence.cc

// jinja2's make_attrgetter: "a.b.0" looked up with getitem part by part; integer parts are
// indexes. Returns the item itself for an empty attribute.
Value get_attribute_path(const Value& item, const Value& attribute);
// jinja2's ignore_case: lowercases strings, other values unchanged.
Value ignore_case(const Value& value);
// soft_str: str(x), with Undefined as "".
inline std::string soft_str(const Value& value) {
  return value.str();
}

}  // namespace locus::jinja
