// The pipeline behind a Tokenizer handle, shared by tokenizer.cc (encode/decode) and
// tokenizer_load.cc (building it from JSON). Internal to src/tokenizer/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace locus {

struct Tokenizer::Impl {
  std::unique_ptr<tokenizer::Normalizer> normalizer;       // may be null
  std::unique_ptr<tokenizer::PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<tokenizer::BpeModel> model;
  std::unique_ptr<tokenizer::PostProcessor> post_processor;  // may be null
  std::unique_ptr<tokenizer::Decoder> decoder;               // may be null
  tokenizer::AddedVocabulary added;
  TokenizerConfig config;

  // Per id (below id_limit): the token string decode uses (added tokens first, as HF's
  // simple_id_to_token), or null; whether it is special; whether text may be committed after it.
  std::vector<const std::string*> token_by_id;
  std::vector<uint8_t> special;
  std::vector<uint8_t> cut_unsafe;
  size_t vocab_size = 0;

  // A lone ByteLevel decoder turns each token into fixed bytes; those are precomputed so decode
  // is a concatenation and one UTF-8 repair.
  bool byte_level_decode = false;
  std::string decode_bytes;
  std::vector<uint32_t> decode_offsets;  // id_limit + 1 entries

  const std::string* token_of(TokenId id) const {
    if (id < 0 || static_cast<size_t>(id) >= token_by_id.size()) return nullptr;
    return token_by_id[static_cast<size_t>(id)];
  }
};

// Builds the pipeline; `json_name`/`config_name` prefix error messages (file names or paths).
Expected<std::shared_ptr<Tokenizer::Impl>> build_tokenizer(std::string_view tokenizer_json,
                                                           std::string_view config_json,
                                                           std::string_view json_name,
                                                           std::string_view config_name);

}  // namespace locus
