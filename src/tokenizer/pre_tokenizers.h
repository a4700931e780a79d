// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split, ByteLevel, Digits, Metaspace and
// Sequence, with HF tokenizers' semantics. Each one splits one piece of text into sub-pieces and
// hands them, left to right, to a sink, so a Sequence streams pieces depth-first into the model
// without building intermediate lists (HF splits breadth-first; each step acts on each piece
// independently, so the results are the same).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/function_ref.h"
#include "tokenizer/json_fields.h"

namespace locus::tokenizer {

struct PreToken {
  std::string_view text;  // never empty
  // The piece begins at offset 0 of the original input (Metaspace's prepend_scheme "first").
  bool at_original_start = false;
  // `text` holds raw bytes that stand for GPT-2 byte-level characters (a ByteLevel step ran);
  // the BPE model reads them through its byte tables instead of mapped strings.
  bool byte_level = false;
};

using PreTokenSink = FunctionRef<void(const PreToken&)>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual Status pre_tokenize(const PreToken& piece, PreTokenSink sink) const = 0;
  // True when a ByteLevel step is part of this pre-tokenizer (the model must accept raw bytes).
  virtual bool uses_byte_level() const { return false; }
};

// `value` is tokenizer.json's "pre_tokenizer" (non-null); errors name fields under `path`.
Expected<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Json& value,
                                                            std::string_view path);

// GPT-2's pattern, used by ByteLevel with use_regex (its \s etc. in Oniguruma's meaning).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace locus::tokenizer
