// Template part of split.h.
#pragma once

#include "tokenizer/utf8.h"

namespace locus::tokenizer {

template <typename Predicate>
void find_char_spans(std::string_view text, Predicate&& is_match, std::vector<Span>& spans) {
  spans.clear();
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    char32_t c = utf8::decode(text, i);
    if (is_match(c)) {
      if (last < start) spans.push_back({last, start, false});
      spans.push_back({start, i, true});
      last = i;
    }
  }
  if (last < text.size()) spans.push_back({last, text.size(), false});
}

}  // namespace locus::tokenizer
