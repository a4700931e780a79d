// Encoding and decoding through the pipeline of HF tokenizers: added tokens → normalizer →
// normalized added tokens → pre-tokenizer → BPE → post-processor; ids → tokens → decoder.
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <fstream>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace locus {
namespace {

namespace fs = std::filesystem;
using tokenizer::AddedSplit;
using tokenizer::PreToken;

Expected<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return io_error(fmt::format("{}: cannot open for reading", path.string()));
  // One read into a buffer of the file's size: tokenizer.json files reach 30 MB.
  std::string contents(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(contents.data(), static_cast<std::streamsize>(contents.size()))) {
    return io_error(fmt::format("{}: read failed", path.string()));
  }
  return contents;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  size_t at = 0;
  while ((at = text.find(from, at)) != std::string::npos) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
}

}  // namespace

Expected<Tokenizer> Tokenizer::load(const fs::path& path) {
  std::error_code error;
  if (!fs::exists(path, error)) {
    return not_found(fmt::format("{}: no such file or folder", path.string()));
  }
  fs::path json_path = path;
  fs::path folder = path.parent_path();
  if (fs::is_directory(path, error)) {
    folder = path;
    json_path = path / "tokenizer.json";
    if (!fs::exists(json_path, error)) {
      return not_found(fmt::format("{}: no tokenizer.json in this folder", path.string()));
    }
  }
  LOCUS_ASSIGN_OR_RETURN(std::string json, read_file(json_path));
  std::string config_json;
  fs::path config_path = folder / "tokenizer_config.json";
  if (fs::exists(config_path, error)) {
    LOCUS_ASSIGN_OR_RETURN(config_json, read_file(config_path));
  }
  LOCUS_ASSIGN_OR_RETURN(
      auto built, build_tokenizer(json, config_json, json_path.string(), config_path.string()));
  fs::path template_path = folder / "chat_template.jinja";
  if (fs::exists(template_path, error)) {
    // transformers prefers chat_template.jinja over the config's chat_template.
    LOCUS_ASSIGN_OR_RETURN(std::string chat_template, read_file(template_path));
    built->config.chat_template = std::move(chat_template);
  }
  return Tokenizer(std::move(built));
}

Expected<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json,
                                         std::string_view config_json) {
  LOCUS_ASSIGN_OR_RETURN(auto built, build_tokenizer(tokenizer_json, config_json, "tokenizer.json",
                                                     "tokenizer_config.json"));
  return Tokenizer(std::move(built));
}

Expected<std::vector<TokenId>> Tokenizer::encode(std::string_view input,
                                                 bool add_special_tokens) const {
  const Impl& impl = *impl_;
  std::string repaired;
  std::string_view text = input;
  if (!tokenizer::utf8::is_valid(input)) {
    repaired = tokenizer::utf8::to_valid(input);
    text = repaired;
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 4 + 4);
  bool missing_unk = false;
  auto model_sink = [&](const PreToken& piece) {
    if (!impl.model->tokenize(piece.text, piece.byte_level, ids)) missing_unk = true;
  };

  // HF's extract_and_normalize: raw added tokens first; each remaining piece is normalized on its
  // own and split again at the normalized added tokens; what remains is pre-tokenized.
  std::vector<AddedSplit> raw_splits, normalized_splits;
  impl.added.split(text, /*normalized_tokens=*/false, raw_splits);
  std::string normalized;
  for (const AddedSplit& split : raw_splits) {
    if (split.id >= 0) {
      ids.push_back(split.id);
      continue;
    }
    std::string_view piece = text.substr(split.start, split.end - split.start);
    bool start_moved = false;
    if (impl.normalizer) {
      normalized.assign(piece);
      LOCUS_RETURN_IF_ERROR(impl.normalizer->normalize(normalized, start_moved));
      piece = normalized;
    }
    if (piece.empty()) continue;
    bool piece_at_start = split.start == 0 && !start_moved;
    if (impl.added.has_normalized_tokens()) {
      impl.added.split(piece, /*normalized_tokens=*/true, normalized_splits);
    } else {
      normalized_splits.assign(1, AddedSplit{0, piece.size(), -1});
    }
    for (const AddedSplit& sub : normalized_splits) {
      if (sub.id >= 0) {
        ids.push_back(sub.id);
        continue;
      }
      PreToken pre_token{piece.substr(sub.start, sub.end - sub.start),
                         piece_at_start && sub.start == 0, false};
      if (impl.pre_tokenizer) {
        LOCUS_RETURN_IF_ERROR(impl.pre_tokenizer->pre_tokenize(pre_token, model_sink));
      } else {
        model_sink(pre_token);
      }
    }
  }
  if (missing_unk) {
    return not_found(
        fmt::format("model.unk_token '{}' is needed for an unknown character but is "
                    "not in the vocabulary",
                    impl.model->unk_token().value_or("")));
  }
  if (impl.post_processor) impl.post_processor->process(ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  auto wanted = [&](TokenId id) {
    return impl.token_of(id) != nullptr &&
           !(skip_special_tokens && impl.special[static_cast<size_t>(id)] != 0);
  };
  if (impl.byte_level_decode) {
    std::string bytes;
    for (TokenId id : ids) {
      if (!wanted(id)) continue;
      auto index = static_cast<size_t>(id);
      bytes.append(impl.decode_bytes, impl.decode_offsets[index],
                   impl.decode_offsets[index + 1] - impl.decode_offsets[index]);
    }
    return tokenizer::utf8::is_valid(bytes) ? bytes : tokenizer::utf8::to_valid(bytes);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (wanted(id)) tokens.push_back(*impl.token_of(id));
  }
  std::string text;
  if (!impl.decoder) {
    // HF joins with spaces when there is no decoder.
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text += ' ';
      text += tokens[i];
    }
    return text;
  }
  impl.decoder->decode_chain(tokens);
  for (const auto& piece : tokens)
    text += piece;
  return text;
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.find(token)) return id;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
  const std::string* token = impl_->token_of(id);
  if (token == nullptr) return std::nullopt;
  return *token;
}

bool Tokenizer::is_special(TokenId id) const {
  return impl_->token_of(id) != nullptr && impl_->special[static_cast<size_t>(id)] != 0;
}

size_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}
size_t Tokenizer::id_limit() const {
  return impl_->token_by_id.size();
}
const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return impl_->added.tokens();
}
const TokenizerConfig& Tokenizer::config() const {
  return impl_->config;
}

std::optional<TokenId> Tokenizer::bos_token_id() const {
  return impl_->config.bos_token ? token_to_id(*impl_->config.bos_token) : std::nullopt;
}
std::optional<TokenId> Tokenizer::eos_token_id() const {
  return impl_->config.eos_token ? token_to_id(*impl_->config.eos_token) : std::nullopt;
}
std::optional<TokenId> Tokenizer::pad_token_id() const {
  return impl_->config.pad_token ? token_to_id(*impl_->config.pad_token) : std::nullopt;
}

bool Tokenizer::can_cut_after(TokenId id) const {
  return impl_->token_of(id) == nullptr || impl_->cut_unsafe[static_cast<size_t>(id)] == 0;
}

std::string clean_up_tokenization(std::string_view text) {
  std::string out(text);
  // The order and the list are transformers' own.
  replace_all(out, " .", ".");
  replace_all(out, " ?", "?");
  replace_all(out, " !", "!");
  replace_all(out, " ,", ",");
  replace_all(out, " ' ", "'");
  replace_all(out, " n't", "n't");
  replace_all(out, " 'm", "'m");
  replace_all(out, " 's", "'s");
  replace_all(out, " 've", "'ve");
  replace_all(out, " 're", "'re");
  return out;
}

}  // namespace locus
