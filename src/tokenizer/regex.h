// Regular expressions of tokenizer.json (written for Oniguruma, which HF tokenizers compiles them
// with) run on PCRE2 with UTF + UCP and JIT. The few shorthands whose Unicode meaning differs
// between the two engines are rewritten to Oniguruma's meaning when compiling, and matches are
// iterated with Oniguruma's rules for empty matches, so splits agree with HF tokenizers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/function_ref.h"

namespace locus::tokenizer {

class Regex {
 public:
  // Compiles an Oniguruma-syntax pattern. Errors name the pattern and PCRE2's reason.
  static Expected<Regex> compile(std::string_view pattern);
  // A pattern matching `literal` exactly (Split/Replace "String" patterns).
  static Expected<Regex> literal(std::string_view literal);

  // Calls on_match(start, end) for each match from left to right, as onig's find_iter: after a
  // match ending at e, an empty match at e is skipped and the search moves one character on.
  // `text` must be well-formed UTF-8. Fails only when the engine does (e.g. a resource limit).
  Status for_each_match(std::string_view text, FunctionRef<void(size_t, size_t)> on_match) const;

  const std::string& pattern() const { return pattern_; }
  // The PCRE2 pattern actually compiled (after the Oniguruma rewrites), for diagnostics.
  const std::string& translated_pattern() const { return translated_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
  std::string translated_;
};

// Rewrites an Oniguruma pattern into PCRE2 syntax with the same meaning: \s, \S, \w, \W, \h, \H
// get Oniguruma's Unicode definitions. Nested classes and class intersections (&&), which PCRE2
// lacks, are an error.
Expected<std::string> translate_oniguruma_pattern(std::string_view pattern);

}  // namespace locus::tokenizer
