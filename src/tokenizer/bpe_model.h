// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocabulary, ranked merges,
// unknown-token and byte-fallback handling, exactly as HF tokenizers' BPE (merge the lowest-rank
// pair first, leftmost on ties, with a priority queue), plus a per-thread word cache. It never
// sees added tokens: those are matched before pre-tokenization.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/flat_hash.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/token_id.h"
#include "tokenizer/tokenizer_json_reader.h"

namespace locus::tokenizer {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object; errors name fields under `path`. `tables`, when
  // given, holds the vocabulary and merges streamed out of the file (see tokenizer_json_reader.h);
  // otherwise they are read from `model`.
  static Expected<std::unique_ptr<BpeModel>> parse(const Json& model, std::string_view path,
                                                   BpeTables* tables = nullptr);

  // Pre-tokens from a ByteLevel pre-tokenizer arrive as raw bytes (the byte → character mapping
  // is folded into these lookups instead of being materialized per word). Call once at load.
  void enable_byte_level_input();

  // Appends the ids of one pre-token. `byte_level`: `word` holds raw bytes that HF would have
  // mapped through GPT-2's byte table first. Returns false only when an unknown character needs
  // the unk token and the vocabulary lacks it (HF's UnkTokenOutOfVocabulary).
  [[nodiscard]] bool tokenize(std::string_view word, bool byte_level,
                              std::vector<TokenId>& out) const;

  std::optional<TokenId> token_to_id(std::string_view token) const { return vocab_.find(token); }
  // The token of `id`, or nullptr when the vocabulary has no such id.
  const std::string* id_to_token(TokenId id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() ||
        !has_token_[static_cast<size_t>(id)]) {
      return nullptr;
    }
    return &tokens_[static_cast<size_t>(id)];
  }
  // One past the largest id in the vocabulary.
  size_t id_limit() const { return tokens_.size(); }
  size_t vocab_size() const { return vocab_.size(); }
  size_t merge_count() const { return merges_.size(); }
  const std::optional<std::string>& unk_token() const { return unk_token_; }
  bool byte_fallback() const { return byte_fallback_; }

 private:
  BpeModel() = default;
  void merge_word(std::string_view word, bool byte_level, std::vector<TokenId>& out,
                  bool& missing_unk) const;
  bool tokenize_piece(std::string_view word, bool byte_level, std::vector<TokenId>& out) const;
  // True when no token has "▁" right after another character, so text may be cut before such a
  // "▁" without changing the BPE result.
  bool metaspace_cuts_are_safe() const;
  // The vocabulary id of one initial symbol (a character with its prefix/suffix), or -1.
  TokenId symbol_id(std::string_view symbol) const;

  StringIdMap vocab_;
  std::vector<std::string> tokens_;  // by id
  std::vector<bool> has_token_;
  MergeMap merges_;
  std::optional<std::string> unk_token_;
  TokenId unk_id_ = -1;
  std::optional<std::string> continuing_subword_prefix_;
  std::optional<std::string> end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool has_affixes_ = false;  // a prefix or suffix changes the initial symbols
  bool split_before_metaspace_ = false;

  std::array<TokenId, 128> ascii_ids_{};          // id of each ASCII character, or -1
  std::array<TokenId, 256> byte_fallback_ids_{};  // id of "<0xXX>", or -1
  // Byte-level input: id of each byte's mapped character, and the vocabulary keyed by raw bytes.
  bool byte_level_ready_ = false;
  std::array<TokenId, 256> byte_ids_{};
  StringIdMap byte_vocab_;

  uint64_t cache_owner_ = 0;
};

}  // namespace locus::tokenizer
