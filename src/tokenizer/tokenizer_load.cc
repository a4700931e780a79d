// Building a Tokenizer's pipeline from tokenizer.json and tokenizer_config.json, following HF
// tokenizers' deserialization and the parts of transformers' loading that change ids.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "core/logging.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json_reader.h"
#include "tokenizer/utf8.h"

namespace locus {
namespace {

using tokenizer::Json;
using tokenizer::json_member;
using tokenizer::json_path;

Expected<std::vector<AddedToken>> parse_added_tokens(const Json& root) {
  std::vector<AddedToken> tokens;
  const Json* list = json_member(root, "added_tokens");
  if (list == nullptr || list->is_null()) return tokens;
  if (!list->is_array()) return tokenizer::json_type_error("added_tokens", "an array", *list);
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& entry = (*list)[i];
    std::string path = json_path("added_tokens", i);
    AddedToken token;
    LOCUS_ASSIGN_OR_RETURN(int64_t id, tokenizer::json_int(entry, "id", path));
    if (id < 0 || id >= (int64_t{1} << 31) - 1) {
      return parse_error(fmt::format("{}.id: {} out of range", path, id));
    }
    token.id = static_cast<TokenId>(id);
    LOCUS_ASSIGN_OR_RETURN(token.content, tokenizer::json_string(entry, "content", path));
    LOCUS_ASSIGN_OR_RETURN(token.special, tokenizer::json_bool(entry, "special", path, false));
    LOCUS_ASSIGN_OR_RETURN(token.lstrip, tokenizer::json_bool(entry, "lstrip", path, false));
    LOCUS_ASSIGN_OR_RETURN(token.rstrip, tokenizer::json_bool(entry, "rstrip", path, false));
    LOCUS_ASSIGN_OR_RETURN(token.normalized, tokenizer::json_bool(entry, "normalized", path, true));
    LOCUS_ASSIGN_OR_RETURN(token.single_word,
                           tokenizer::json_bool(entry, "single_word", path, false));
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// tokenizer_config.json can name tokens that tokenizer.json lacks (added_tokens_decoder) or
// mark more tokens special (additional_special_tokens); transformers adds them at load.
void merge_config_tokens(const TokenizerConfig& config, const tokenizer::BpeModel& model,
                         std::vector<AddedToken>& tokens) {
  std::unordered_set<std::string> present;
  for (const auto& token : tokens)
    present.insert(token.content);
  for (const auto& token : config.added_tokens_decoder) {
    if (token.content.empty() || present.count(token.content) != 0) continue;
    tokens.push_back(token);
    present.insert(token.content);
  }
  for (const auto& content : config.additional_special_tokens) {
    auto it = std::find_if(tokens.begin(), tokens.end(),
                           [&](const AddedToken& token) { return token.content == content; });
    if (it != tokens.end()) {
      it->special = true;
    } else if (auto id = model.token_to_id(content)) {
      AddedToken token;
      token.content = content;
      token.id = *id;
      token.special = true;
      token.normalized = false;
      tokens.push_back(std::move(token));
    }
  }
}

std::optional<TokenId> lookup(const Tokenizer::Impl& impl,
                              const std::optional<std::string>& token) {
  if (!token) return std::nullopt;
  if (auto id = impl.added.find(*token)) return id;
  return impl.model->token_to_id(*token);
}

// transformers (LlamaTokenizerFast.update_post_processor, and TokenizersBackend in v5) replaces
// the post-processor with "[bos] $A [eos]" when tokenizer_config.json sets add_bos_token or
// add_eos_token. DeepSeek-V3 relies on it: its tokenizer.json adds no BOS, its config does.
Status apply_config_template(Tokenizer::Impl& impl, std::string_view config_name) {
  const auto& config = impl.config;
  if (!config.add_bos_token && !config.add_eos_token) return Status::ok();
  std::vector<TokenId> prefix, suffix;
  if (config.add_bos_token.value_or(false) && config.bos_token) {
    auto id = lookup(impl, config.bos_token);
    if (!id) {
      return not_found(fmt::format("{}: bos_token '{}' is not in the vocabulary", config_name,
                                   *config.bos_token));
    }
    prefix.push_back(*id);
  }
  if (config.add_eos_token.value_or(false) && config.eos_token) {
    auto id = lookup(impl, config.eos_token);
    if (!id) {
      return not_found(fmt::format("{}: eos_token '{}' is not in the vocabulary", config_name,
                                   *config.eos_token));
    }
    suffix.push_back(*id);
  }
  impl.post_processor = tokenizer::make_template_processor(std::move(prefix), std::move(suffix));
  return Status::ok();
}

void build_id_tables(Tokenizer::Impl& impl) {
  size_t limit = impl.model->id_limit();
  for (const auto& token : impl.added.tokens())
    limit = std::max(limit, static_cast<size_t>(token.id) + 1);
  impl.token_by_id.assign(limit, nullptr);
  impl.special.assign(limit, 0);
  impl.cut_unsafe.assign(limit, 0);
  for (size_t id = 0; id < impl.model->id_limit(); ++id) {
    impl.token_by_id[id] = impl.model->id_to_token(static_cast<TokenId>(id));
  }
  std::unordered_set<TokenId> added_ids;
  for (const auto& token : impl.added.tokens()) {
    if (token.content.empty()) continue;
    impl.token_by_id[static_cast<size_t>(token.id)] = &token.content;
    added_ids.insert(token.id);
  }
  impl.vocab_size = impl.model->vocab_size();
  for (TokenId id : added_ids) {
    if (impl.model->id_to_token(id) == nullptr) ++impl.vocab_size;
  }
  // HF skips a token when its string is a special added token's, whichever id it came from.
  for (const auto& token : impl.added.tokens()) {
    if (!token.special || token.content.empty()) continue;
    impl.special[static_cast<size_t>(token.id)] = 1;
    if (auto id = impl.model->token_to_id(token.content))
      impl.special[static_cast<size_t>(*id)] = 1;
  }
  if (impl.decoder) {
    for (size_t id = 0; id < limit; ++id) {
      if (impl.token_by_id[id] != nullptr && !impl.decoder->can_cut_after(*impl.token_by_id[id])) {
        impl.cut_unsafe[id] = 1;
      }
    }
  }
  impl.byte_level_decode = impl.decoder && impl.decoder->is_byte_level();
  if (impl.byte_level_decode) {
    impl.decode_offsets.assign(limit + 1, 0);
    for (size_t id = 0; id < limit; ++id) {
      impl.decode_offsets[id] = static_cast<uint32_t>(impl.decode_bytes.size());
      const std::string* token = impl.token_by_id[id];
      if (token != nullptr &&
          !tokenizer::append_bytes_of_byte_level_token(impl.decode_bytes, *token)) {
        impl.decode_bytes += *token;
      }
    }
    impl.decode_offsets[limit] = static_cast<uint32_t>(impl.decode_bytes.size());
  }
}

}  // namespace

Expected<std::shared_ptr<Tokenizer::Impl>> build_tokenizer(std::string_view tokenizer_json,
                                                           std::string_view config_json,
                                                           std::string_view json_name,
                                                           std::string_view config_name) {
  auto impl = std::make_shared<Tokenizer::Impl>();
  if (!config_json.empty()) {
    auto config = parse_tokenizer_config(config_json);
    if (!config) return config.error().with_context(config_name);
    impl->config = std::move(*config);
  }
  auto in_file = [&](const Status& status) { return status.with_context(json_name); };
  auto document = tokenizer::read_tokenizer_json(tokenizer_json);
  if (!document) return in_file(document.error());
  const Json& root = document->root;
  if (!root.is_object())
    return in_file(tokenizer::json_type_error("(top level)", "an object", root));

  const Json* model = json_member(root, "model");
  if (model == nullptr) return in_file(parse_error("model: missing"));
  if (!model->is_object()) return in_file(tokenizer::json_type_error("model", "an object", *model));
  const Json* model_type = json_member(*model, "type");
  std::string type = model_type && model_type->is_string() ? model_type->get<std::string>() : "";
  // Files from before "type" was written are BPE when they carry merges.
  if (type.empty() && json_member(*model, "merges") != nullptr) type = "BPE";
  if (type != "BPE") {
    return in_file(unsupported(fmt::format("model.type: '{}' is not supported (supported: BPE)",
                                           type.empty() ? "(none)" : type)));
  }
  auto bpe = tokenizer::BpeModel::parse(*model, "model", &document->tables);
  if (!bpe) return in_file(bpe.error());
  impl->model = std::move(*bpe);

  if (const Json* value = json_member(root, "normalizer"); value && !value->is_null()) {
    auto normalizer = tokenizer::parse_normalizer(*value, "normalizer");
    if (!normalizer) return in_file(normalizer.error());
    impl->normalizer = std::move(*normalizer);
  }
  if (const Json* value = json_member(root, "pre_tokenizer"); value && !value->is_null()) {
    auto pre_tokenizer = tokenizer::parse_pre_tokenizer(*value, "pre_tokenizer");
    if (!pre_tokenizer) return in_file(pre_tokenizer.error());
    impl->pre_tokenizer = std::move(*pre_tokenizer);
    if (impl->pre_tokenizer->uses_byte_level()) impl->model->enable_byte_level_input();
  }
  if (const Json* value = json_member(root, "post_processor"); value && !value->is_null()) {
    auto post_processor = tokenizer::parse_post_processor(*value, "post_processor");
    if (!post_processor) return in_file(post_processor.error());
    impl->post_processor = std::move(*post_processor);
  }
  if (const Json* value = json_member(root, "decoder"); value && !value->is_null()) {
    auto decoder = tokenizer::parse_decoder(*value, "decoder");
    if (!decoder) return in_file(decoder.error());
    impl->decoder = std::move(*decoder);
  }
  // truncation and padding are ignored: transformers overrides them per call, and locus never
  // truncates or pads a prompt silently.

  auto added = parse_added_tokens(root);
  if (!added) return in_file(added.error());
  for (auto& token : *added) {
    // HF keeps the model's id when the content is in the vocabulary (and warns on a mismatch).
    if (auto model_id = impl->model->token_to_id(token.content);
        model_id && *model_id != token.id) {
      log::warn("{}: added token '{}' has id {} but the vocabulary gives it {}; using {}",
                json_name, token.content, token.id, *model_id, *model_id);
      token.id = *model_id;
    }
  }
  merge_config_tokens(impl->config, *impl->model, *added);
  auto vocabulary = tokenizer::AddedVocabulary::build(std::move(*added), impl->normalizer.get(),
                                                      impl->config.split_special_tokens);
  if (!vocabulary) return in_file(vocabulary.error());
  impl->added = std::move(*vocabulary);

  LOCUS_RETURN_IF_ERROR(apply_config_template(*impl, config_name));
  build_id_tables(*impl);
  log::debug("{}: BPE with {} tokens, {} merges, {} added tokens", json_name,
             impl->model->vocab_size(), impl->model->merge_count(), impl->added.tokens().size());
  return impl;
}

}  // namespace locus
