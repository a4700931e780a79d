// Added tokens (tokenizer.json "added_tokens"): matched as exact strings before normalization
// and pre-tokenization, leftmost-longest like HF's Aho-Corasick pass, with the lstrip, rstrip,
// single_word, normalized and special flags of HF's AddedVocabulary. Tokens with normalized=false
// are matched in the raw input; tokens with normalized=true in the normalized pieces, against
// their own normalized form.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_token.h"
#include "tokenizer/flat_hash.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/token_id.h"

namespace locus::tokenizer {

// One piece of a split: text [start, end), or an added token when id >= 0.
struct AddedSplit {
  size_t start;
  size_t end;
  TokenId id;
};

class AddedVocabulary {
 public:
  // `normalizer` (may be null) gives the normalized forms of normalized tokens. With
  // `split_special_tokens`, special tokens are not matched (they tokenize as text).
  static Expected<AddedVocabulary> build(std::vector<AddedToken> tokens,
                                         const Normalizer* normalizer, bool split_special_tokens);

  // Splits `text` at the raw (normalized=false) or the normalized tokens. Pieces cover the text;
  // empty text pieces are omitted.
  void split(std::string_view text, bool normalized_tokens, std::vector<AddedSplit>& out) const;
  bool has_normalized_tokens() const { return normalized_.token_count > 0; }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // The added token with this id, or nullptr.
  const AddedToken* find(TokenId id) const;
  // The id of the added token with this content, if any.
  std::optional<TokenId> find(std::string_view content) const { return by_content_.find(content); }

 private:
  // A byte trie over one set of token strings. Node 0 is the root.
  struct Trie {
    std::vector<int32_t> terminal;  // per node: index into tokens_, or -1
    MergeMap edges;                 // (node, byte) → child node, in the merge map's slots
    std::array<bool, 256> first_byte{};
    size_t token_count = 0;
    void add(std::string_view key, int32_t token_index);
  };
  void find_matches(std::string_view text, const Trie& trie, std::vector<AddedSplit>& out) const;

  std::vector<AddedToken> tokens_;
  StringIdMap by_content_;
  std::unordered_map<TokenId, size_t> by_id_;
  Trie raw_;
  Trie normalized_;
  bool split_special_tokens_ = false;
};

}  // namespace locus::tokenizer
