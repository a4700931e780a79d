// Added-token matching as in HF tokenizers' AddedVocabulary; see added_vocabulary.h.
#include "tokenizer/added_vocabulary.h"

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace locus::tokenizer {

// Trie edges live in a MergeMap keyed by (node, byte): it is the open-addressing (int, int) →
// int table this library already has, and a node's children are few and sparse.
void AddedVocabulary::Trie::add(std::string_view key, int32_t token_index) {
  if (terminal.empty()) terminal.push_back(-1);
  int32_t node = 0;
  for (char c : key) {
    auto byte = static_cast<uint8_t>(c);
    if (const auto* edge = edges.find(node, byte)) {
      node = edge->rank;
      continue;
    }
    auto child = static_cast<int32_t>(terminal.size());
    terminal.push_back(-1);
    edges.insert(node, byte, {child, 0});
    node = child;
  }
  first_byte[static_cast<uint8_t>(key[0])] = true;
  // A later token with the same string wins, as the later entry of HF's map does.
  terminal[static_cast<size_t>(node)] = token_index;
  ++token_count;
}

Expected<AddedVocabulary> AddedVocabulary::build(std::vector<AddedToken> tokens,
                                                 const Normalizer* normalizer,
                                                 bool split_special_tokens) {
  AddedVocabulary vocabulary;
  vocabulary.tokens_ = std::move(tokens);
  vocabulary.split_special_tokens_ = split_special_tokens;
  vocabulary.by_content_.reserve(vocabulary.tokens_.size());
  for (size_t i = 0; i < vocabulary.tokens_.size(); ++i) {
    const AddedToken& token = vocabulary.tokens_[i];
    if (token.content.empty()) continue;  // HF ignores empty added tokens
    vocabulary.by_content_.insert(token.content, token.id);
    vocabulary.by_id_[token.id] = i;
    // With split_special_tokens (HF's encode_special_tokens) special tokens are plain text.
    if (token.special && split_special_tokens) continue;
    auto index = static_cast<int32_t>(i);
    if (!token.normalized) {
      vocabulary.raw_.add(token.content, index);
      continue;
    }
    std::string key = token.content;
    if (normalizer != nullptr) {
      bool start_moved = false;
      auto status = normalizer->normalize(key, start_moved);
      if (!status.is_ok()) {
        return status.with_context(fmt::format("normalizing added token '{}'", token.content));
      }
    }
    if (!key.empty()) vocabulary.normalized_.add(key, index);
  }
  return vocabulary;
}

const AddedToken* AddedVocabulary::find(TokenId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::split(std::string_view text, bool normalized_tokens,
                            std::vector<AddedSplit>& out) const {
  out.clear();
  const Trie& trie = normalized_tokens ? normalized_ : raw_;
  if (trie.token_count == 0) {
    if (!text.empty()) out.push_back({0, text.size(), -1});
    return;
  }
  find_matches(text, trie, out);
}

void AddedVocabulary::find_matches(std::string_view text, const Trie& trie,
                                   std::vector<AddedSplit>& out) const {
  size_t start_offset = 0;
  auto push_text = [&](size_t start, size_t end) {
    if (start < end) out.push_back({start, end, -1});
  };
  size_t i = 0;
  while (i < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    // The longest token starting here (leftmost-longest, as HF's Aho-Corasick).
    int32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const auto* edge = trie.edges.find(node, static_cast<uint8_t>(text[j]));
      if (edge == nullptr) break;
      node = edge->rank;
      if (trie.terminal[static_cast<size_t>(node)] >= 0) {
        best = trie.terminal[static_cast<size_t>(node)];
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = best_end;
    i = best_end;
    const AddedToken& token = tokens_[static_cast<size_t>(best)];
    if (token.single_word) {
      bool space_before = start == 0 || !utf8::is_word_char(utf8::first_char(text.substr(
                                            utf8::last_char_start(text.substr(0, start)))));
      bool space_after =
          stop == text.size() || !utf8::is_word_char(utf8::first_char(text.substr(stop)));
      if (!space_before || !space_after) continue;  // inside a word: not this token
    }
    if (token.lstrip) {
      // Whitespace before the token joins it, except what a previous token already took.
      start = std::max(utf8::trailing_whitespace_start(text.substr(0, start)), start_offset);
    }
    if (token.rstrip) stop += utf8::leading_whitespace_end(text.substr(stop));
    push_text(start_offset, start);
    out.push_back({start, stop, token.id});
    start_offset = stop;
  }
  push_text(start_offset, text.size());
}

}  // namespace locus::tokenizer
