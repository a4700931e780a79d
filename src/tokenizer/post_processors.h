// Post-processors of tokenizer.json ("post_processor"): TemplateProcessing (the BOS/EOS
// templates), ByteLevel (offsets only, so a no-op on ids) and Sequence. They only ever add
// special tokens around the single sequence locus encodes; pair templates are parsed but unused.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/token_id.h"

namespace locus::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Adds the template's special tokens around `ids` when add_special_tokens is set.
  virtual void process(std::vector<TokenId>& ids, bool add_special_tokens) const = 0;
};

Expected<std::unique_ptr<PostProcessor>> parse_post_processor(const Json& value,
                                                              std::string_view path);

// A single-sequence template: `prefix` ids, the sequence, `suffix` ids (what transformers builds
// from tokenizer_config.json's add_bos_token / add_eos_token).
std::unique_ptr<PostProcessor> make_template_processor(std::vector<TokenId> prefix,
                                                       std::vector<TokenId> suffix);

}  // namespace locus::tokenizer
