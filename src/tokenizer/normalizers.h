// Normalizers of tokenizer.json ("normalizer"): NFC, NFD, NFKC, NFKD, Lowercase, Replace,
// Prepend, Strip, StripAccents and Sequence, with HF tokenizers' semantics. Unicode data comes
// from utf8proc. Anything else is rejected at load with its type named.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/json_fields.h"

namespace locus::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` in place. Sets `start_moved` when the first character left no longer comes
  // from the text's first original character (Strip removing leading spaces, a Replace deleting
  // it): Metaspace's prepend_scheme "first" asks exactly that of HF's offset alignments.
  virtual Status normalize(std::string& text, bool& start_moved) const = 0;
};

// `value` is tokenizer.json's "normalizer" (non-null); errors name fields under `path`.
Expected<std::unique_ptr<Normalizer>> parse_normalizer(const Json& value, std::string_view path);

}  // namespace locus::tokenizer
