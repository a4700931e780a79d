// tokenizer_config.json parsing; see tokenizer_config.h.
#include "tokenizer/tokenizer_config.h"

#include <fmt/format.h>

#include <charconv>

#include "tokenizer/json_fields.h"

namespace locus {
namespace {

using tokenizer::Json;
using tokenizer::json_bool;
using tokenizer::json_member;
using tokenizer::json_path;
using tokenizer::json_type_error;

// A special token: "<s>", {"content": "<s>", ...} (an AddedToken dict) or null.
Expected<std::optional<std::string>> special_token(const Json& config, std::string_view key) {
  const Json* value = json_member(config, key);
  if (value == nullptr || value->is_null()) return std::optional<std::string>();
  if (value->is_string()) return std::optional<std::string>(value->get<std::string>());
  if (value->is_object()) {
    LOCUS_ASSIGN_OR_RETURN(std::string content, tokenizer::json_string(*value, "content", key));
    return std::optional<std::string>(std::move(content));
  }
  return json_type_error(key, "a string, an AddedToken object or null", *value);
}

Expected<AddedToken> added_token(const Json& value, std::string_view path) {
  AddedToken token;
  LOCUS_ASSIGN_OR_RETURN(token.content, tokenizer::json_string(value, "content", path));
  LOCUS_ASSIGN_OR_RETURN(token.special, json_bool(value, "special", path, false));
  LOCUS_ASSIGN_OR_RETURN(token.lstrip, json_bool(value, "lstrip", path, false));
  LOCUS_ASSIGN_OR_RETURN(token.rstrip, json_bool(value, "rstrip", path, false));
  // transformers' AddedToken defaults normalized to "not special".
  LOCUS_ASSIGN_OR_RETURN(token.normalized, json_bool(value, "normalized", path, !token.special));
  LOCUS_ASSIGN_OR_RETURN(token.single_word, json_bool(value, "single_word", path, false));
  return token;
}

}  // namespace

Expected<TokenizerConfig> parse_tokenizer_config(std::string_view json_text) {
  Json config = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return parse_error("not valid JSON");
  if (!config.is_object()) return json_type_error("(top level)", "an object", config);
  TokenizerConfig out;
  LOCUS_ASSIGN_OR_RETURN(out.bos_token, special_token(config, "bos_token"));
  LOCUS_ASSIGN_OR_RETURN(out.eos_token, special_token(config, "eos_token"));
  LOCUS_ASSIGN_OR_RETURN(out.pad_token, special_token(config, "pad_token"));
  LOCUS_ASSIGN_OR_RETURN(out.unk_token, special_token(config, "unk_token"));
  LOCUS_ASSIGN_OR_RETURN(out.add_bos_token,
                         tokenizer::json_optional_bool(config, "add_bos_token", ""));
  LOCUS_ASSIGN_OR_RETURN(out.add_eos_token,
                         tokenizer::json_optional_bool(config, "add_eos_token", ""));
  LOCUS_ASSIGN_OR_RETURN(out.clean_up_tokenization_spaces,
                         tokenizer::json_optional_bool(config, "clean_up_tokenization_spaces", ""));
  LOCUS_ASSIGN_OR_RETURN(out.split_special_tokens,
                         json_bool(config, "split_special_tokens", "", false));
  if (const Json* cls = json_member(config, "tokenizer_class"); cls && cls->is_string()) {
    out.tokenizer_class = cls->get<std::string>();
  }
  if (const Json* length = json_member(config, "model_max_length"); length && length->is_number()) {
    out.model_max_length = length->get<double>();
  }
  if (const Json* list = json_member(config, "additional_special_tokens");
      list && !list->is_null()) {
    if (!list->is_array()) return json_type_error("additional_special_tokens", "an array", *list);
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& entry = (*list)[i];
      std::string path = json_path("additional_special_tokens", i);
      if (entry.is_string()) {
        out.additional_special_tokens.push_back(entry.get<std::string>());
      } else {
        LOCUS_ASSIGN_OR_RETURN(std::string content, tokenizer::json_string(entry, "content", path));
        out.additional_special_tokens.push_back(std::move(content));
      }
    }
  }
  if (const Json* decoder = json_member(config, "added_tokens_decoder");
      decoder && !decoder->is_null()) {
    if (!decoder->is_object())
      return json_type_error("added_tokens_decoder", "an object", *decoder);
    for (auto it = decoder->begin(); it != decoder->end(); ++it) {
      std::string path = fmt::format("added_tokens_decoder[\"{}\"]", it.key());
      TokenId id = -1;
      const std::string& key = it.key();
      auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (error != std::errc() || end != key.data() + key.size() || id < 0) {
        return parse_error(fmt::format("{}: key is not a token id", path));
      }
      LOCUS_ASSIGN_OR_RETURN(AddedToken token, added_token(it.value(), path));
      token.id = id;
      out.added_tokens_decoder.push_back(std::move(token));
    }
  }
  if (const Json* chat = json_member(config, "chat_template"); chat && !chat->is_null()) {
    if (chat->is_string()) {
      out.chat_template = chat->get<std::string>();
    } else if (chat->is_array()) {
      for (size_t i = 0; i < chat->size(); ++i) {
        std::string path = json_path("chat_template", i);
        LOCUS_ASSIGN_OR_RETURN(std::string name, tokenizer::json_string((*chat)[i], "name", path));
        LOCUS_ASSIGN_OR_RETURN(std::string text,
                               tokenizer::json_string((*chat)[i], "template", path));
        if (name == "default") out.chat_template = text;
        out.named_chat_templates.emplace_back(std::move(name), std::move(text));
      }
    } else {
      return json_type_error("chat_template", "a string or a list of named templates", *chat);
    }
  }
  return out;
}

}  // namespace locus
