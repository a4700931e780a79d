// Splitting a string by a pattern the way HF tokenizers' NormalizedString::split does: the text is
// first partitioned into match / non-match spans, then a SplitDelimiterBehavior decides which
// spans survive and which merge. Shared by the Split, Digits and Metaspace pre-tokenizers and the
// Replace normalizer/decoder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/function_ref.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"

namespace locus::tokenizer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Expected<SplitBehavior> parse_split_behavior(const Json& object, std::string_view path);

// One span of a partition of a text: [start, end) and whether the pattern matched it.
struct Span {
  size_t start;
  size_t end;
  bool is_match;
};

// A tokenizer.json pattern: {"String": "..."} or {"Regex": "..."}.
class SplitPattern {
 public:
  static Expected<SplitPattern> parse(const Json& object, std::string_view path);
  static Expected<SplitPattern> from_regex(std::string_view pattern);
  static Expected<SplitPattern> from_literal(std::string_view literal);

  // Calls on_match(start, end) for each match, left to right, without overlaps.
  Status for_each_match(std::string_view text, FunctionRef<void(size_t, size_t)> on_match) const;
  // The partition of `text` into spans (HF's Pattern::find_matches): a single non-match span
  // (0, 0) for an empty text.
  Status find_spans(std::string_view text, std::vector<Span>& spans) const;

 private:
  std::optional<std::string> literal_;  // fast path for non-empty String patterns
  std::optional<Regex> regex_;
};

// The partition for a character predicate: every matching character is its own match span.
template <typename Predicate>
void find_char_spans(std::string_view text, Predicate&& is_match, std::vector<Span>& spans);

// Applies `behavior` (and `invert`, which swaps match and non-match first) to a partition and
// returns the pieces that survive, dropping empty ones as PreTokenizedString::split does.
void pieces_for_behavior(std::vector<Span>& spans, SplitBehavior behavior, bool invert,
                         std::vector<std::pair<size_t, size_t>>& pieces);

}  // namespace locus::tokenizer

#include "tokenizer/split_inl.h"
