// A Hugging Face tokenizer, natively: loads a model's tokenizer.json (+ tokenizer_config.json)
// and encodes and decodes exactly as the `tokenizers` library does, for the BPE tokenizers of
// the models locus serves (byte-level: Qwen3, DeepSeek-V3, Llama 3, GPT-OSS, GLM, MiniMax;
// SentencePiece-style with byte fallback: Llama 2, Mistral, Mixtral). A component it does not
// implement is a load error naming the component; it never falls back to something close.
//
// Thread safety: a Tokenizer is an immutable shared handle; copies are cheap and any number of
// threads may encode and decode at once.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_token.h"
#include "tokenizer/token_id.h"
#include "tokenizer/tokenizer_config.h"

namespace locus {

class Tokenizer {
 public:
  // `path` is a model folder (tokenizer.json, and tokenizer_config.json / chat_template.jinja
  // when present) or a tokenizer.json file (a tokenizer_config.json beside it is read too).
  static Expected<Tokenizer> load(const std::filesystem::path& path);
  // From file contents; an empty `config_json` means there is no tokenizer_config.json.
  static Expected<Tokenizer> from_json(std::string_view tokenizer_json,
                                       std::string_view config_json = {});

  // Text → ids. Ill-formed UTF-8 is first replaced by U+FFFD per maximal subpart (what a lossy
  // decode of the bytes gives HF). add_special_tokens applies the post-processor's template
  // (BOS/EOS). Fails only when an engine limit is hit or the unk token is missing.
  Expected<std::vector<TokenId>> encode(std::string_view text,
                                        bool add_special_tokens = true) const;

  // Ids → text, as HF's decode: ids outside the vocabulary are skipped; skip_special_tokens
  // drops added tokens marked special. No clean-up of spaces (see clean_up_tokenization).
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(TokenId id) const;
  bool is_special(TokenId id) const;
  // Number of tokens, model vocabulary plus added tokens (HF get_vocab_size(true)).
  size_t vocab_size() const;
  // One past the largest id: every valid id is below it.
  size_t id_limit() const;
  const std::vector<AddedToken>& added_tokens() const;
  const TokenizerConfig& config() const;
  std::optional<TokenId> bos_token_id() const;
  std::optional<TokenId> eos_token_id() const;
  std::optional<TokenId> pad_token_id() const;

  // False when text decoded after `id` could still change with later ids (a byte-fallback
  // token in the middle of a multi-byte character); the incremental detokenizer waits then.
  bool can_cut_after(TokenId id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// transformers' clean_up_tokenization (" ." → ".", " n't" → "n't", ...), which transformers
// applies after decoding when clean_up_tokenization_spaces is set; HF tokenizers never does.
std::string clean_up_tokenization(std::string_view text);

}  // namespace locus
