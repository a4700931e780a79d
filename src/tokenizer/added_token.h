// An added token of tokenizer.json ("added_tokens") or tokenizer_config.json
// ("added_tokens_decoder"), with HF's matching flags. Matching itself is added_vocabulary.h.
#pragma once

#include <string>

#include "tokenizer/token_id.h"

namespace locus {

struct AddedToken {
  std::string content;
  TokenId id = -1;
  bool special = false;      // skipped by decode(skip_special_tokens)
  bool lstrip = false;       // also swallows whitespace on its left
  bool rstrip = false;       // also swallows whitespace on its right
  bool normalized = true;    // matched in the normalized text rather than the raw input
  bool single_word = false;  // matched only when not inside a word
};

}  // namespace locus
