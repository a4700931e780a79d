// The parts of tokenizer_config.json (transformers' file next to tokenizer.json) that change how
// text is encoded or decoded: special-token names, add_bos_token / add_eos_token, extra added
// tokens, split_special_tokens, clean_up_tokenization_spaces; plus the chat template text for the
// chat-template renderer. Unknown fields are ignored, as transformers does.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_token.h"

namespace locus {

struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  std::optional<bool> clean_up_tokenization_spaces;
  bool split_special_tokens = false;
  std::vector<std::string> additional_special_tokens;
  std::vector<AddedToken> added_tokens_decoder;
  // "chat_template": a string, or the "default" entry of a list of named templates (all named
  // ones are kept too). chat_template.jinja in the model folder takes precedence when loading a
  // folder.
  std::optional<std::string> chat_template;
  std::vector<std::pair<std::string, std::string>> named_chat_templates;
  std::optional<double> model_max_length;
  std::string tokenizer_class;
};

// Parses tokenizer_config.json's text; errors name the field.
Expected<TokenizerConfig> parse_tokenizer_config(std::string_view json_text);

}  // namespace locus
