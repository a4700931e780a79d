// Decoders of tokenizer.json ("decoder"): ByteLevel, ByteFallback, Metaspace, Fuse, Strip,
// Replace and Sequence, with HF tokenizers' decode_chain semantics (each turns the list of token
// strings into a new list; the result is their concatenation).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_fields.h"

namespace locus::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // False when text decoded after this token may still change once later tokens arrive, beyond
  // the usual incomplete UTF-8 character: ByteFallback decodes a whole run of <0xXX> tokens at
  // once and replaces every byte of the run with U+FFFD if the run is ill-formed. Incremental
  // detokenization never commits text in the middle of such a run.
  virtual bool can_cut_after(std::string_view /*token*/) const { return true; }
  // True for a lone ByteLevel decoder, which the Tokenizer runs on precomputed token bytes.
  virtual bool is_byte_level() const { return false; }
};

Expected<std::unique_ptr<Decoder>> parse_decoder(const Json& value, std::string_view path);

}  // namespace locus::tokenizer
