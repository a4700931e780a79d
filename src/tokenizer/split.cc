// Pattern partitions and split behaviors as in HF tokenizers; see split.h.
#include "tokenizer/split.h"

#include <fmt/format.h>

#include <algorithm>

namespace locus::tokenizer {

Expected<SplitBehavior> parse_split_behavior(const Json& object, std::string_view path) {
  LOCUS_ASSIGN_OR_RETURN(std::string name, json_string(object, "behavior", path));
  // HF accepts both spellings of each behavior (serde aliases).
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  lower.erase(std::remove(lower.begin(), lower.end(), '_'), lower.end());
  if (lower == "removed") return SplitBehavior::kRemoved;
  if (lower == "isolated") return SplitBehavior::kIsolated;
  if (lower == "mergedwithprevious") return SplitBehavior::kMergedWithPrevious;
  if (lower == "mergedwithnext") return SplitBehavior::kMergedWithNext;
  if (lower == "contiguous") return SplitBehavior::kContiguous;
  return parse_error(
      fmt::format("{}: unknown split behavior '{}' (expected Removed, Isolated, "
                  "MergedWithPrevious, MergedWithNext or Contiguous)",
                  json_path(path, "behavior"), name));
}

Expected<SplitPattern> SplitPattern::parse(const Json& object, std::string_view path) {
  if (!object.is_object())
    return json_type_error(path, "a {\"String\"|\"Regex\": ...} object", object);
  if (const Json* literal = json_member(object, "String")) {
    if (!literal->is_string())
      return json_type_error(json_path(path, "String"), "a string", *literal);
    return from_literal(literal->get<std::string>());
  }
  if (const Json* regex = json_member(object, "Regex")) {
    if (!regex->is_string()) return json_type_error(json_path(path, "Regex"), "a string", *regex);
    auto pattern = from_regex(regex->get<std::string>());
    if (!pattern) return pattern.error().with_context(json_path(path, "Regex"));
    return pattern;
  }
  return parse_error(fmt::format("{}: pattern needs a \"String\" or \"Regex\" member", path));
}

Expected<SplitPattern> SplitPattern::from_regex(std::string_view pattern) {
  LOCUS_ASSIGN_OR_RETURN(Regex regex, Regex::compile(pattern));
  SplitPattern result;
  result.regex_ = std::move(regex);
  return result;
}

Expected<SplitPattern> SplitPattern::from_literal(std::string_view literal) {
  SplitPattern result;
  if (!literal.empty()) {
    result.literal_ = std::string(literal);
    return result;
  }
  // An empty literal matches the empty string everywhere, with onig's iteration rules.
  LOCUS_ASSIGN_OR_RETURN(Regex regex, Regex::literal(literal));
  result.regex_ = std::move(regex);
  return result;
}

Status SplitPattern::for_each_match(std::string_view text,
                                    FunctionRef<void(size_t, size_t)> on_match) const {
  if (literal_) {
    size_t from = 0;
    while (true) {
      size_t at = text.find(*literal_, from);
      if (at == std::string_view::npos) break;
      on_match(at, at + literal_->size());
      from = at + literal_->size();
    }
    return Status::ok();
  }
  return regex_->for_each_match(text, on_match);
}

Status SplitPattern::find_spans(std::string_view text, std::vector<Span>& spans) const {
  spans.clear();
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return Status::ok();
  }
  size_t previous = 0;
  LOCUS_RETURN_IF_ERROR(for_each_match(text, [&](size_t start, size_t end) {
    if (previous != start) spans.push_back({previous, start, false});
    spans.push_back({start, end, true});
    previous = end;
  }));
  if (previous != text.size()) spans.push_back({previous, text.size(), false});
  return Status::ok();
}

void pieces_for_behavior(std::vector<Span>& spans, SplitBehavior behavior, bool invert,
                         std::vector<std::pair<size_t, size_t>>& pieces) {
  pieces.clear();
  if (invert) {
    for (auto& span : spans)
      span.is_match = !span.is_match;
  }
  auto keep = [&](size_t start, size_t end) {
    if (start < end) pieces.emplace_back(start, end);
  };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& span : spans)
        keep(span.start, span.end);
      return;
    case SplitBehavior::kRemoved:
      for (const auto& span : spans) {
        if (!span.is_match) keep(span.start, span.end);
      }
      return;
    case SplitBehavior::kContiguous:
    case SplitBehavior::kMergedWithPrevious: {
      // Contiguous: a span joins the previous piece when both have the same kind.
      // MergedWithPrevious: a match joins the previous piece when that piece is not a match.
      std::vector<std::pair<size_t, size_t>> merged;
      bool previous_match = false;
      for (const auto& span : spans) {
        bool join = behavior == SplitBehavior::kContiguous ? span.is_match == previous_match
                                                           : span.is_match && !previous_match;
        if (join && !merged.empty()) {
          merged.back().second = span.end;
        } else {
          merged.emplace_back(span.start, span.end);
        }
        previous_match = span.is_match;
      }
      for (const auto& [start, end] : merged)
        keep(start, end);
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      // Walks right to left: a match joins the following piece unless that piece is a match.
      std::vector<std::pair<size_t, size_t>> merged;
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().first = it->start;
        } else {
          merged.emplace_back(it->start, it->end);
        }
        previous_match = it->is_match;
      }
      for (auto it = merged.rbegin(); it != merged.rend(); ++it)
        keep(it->first, it->second);
      return;
    }
  }
}

}  // namespace locus::tokenizer
