// `locus tokenize MODEL "text"`: encode text with a model's tokenizer.json (+ tokenizer_config)
// and print the ids; `--decode 1,2,3` prints the text of ids instead. The same Tokenizer the
// server uses, so it answers "what ids does locus send the model for this prompt".
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tokenizer/tokenizer.h"

namespace locus::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  bool has_text = false;
  std::string decode;
  bool no_special = false;
  bool show_tokens = false;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

// "1,2,3", "1 2 3" or "[1, 2, 3]".
Expected<std::vector<TokenId>> parse_ids(const std::string& text, const Tokenizer& tokenizer) {
  std::vector<TokenId> ids;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == ',' || c == ' ' || c == '[' || c == ']' || c == '\n' || c == '\t') {
      ++i;
      continue;
    }
    TokenId id = 0;
    auto [end, error] = std::from_chars(text.data() + i, text.data() + text.size(), id);
    if (error != std::errc() || end == text.data() + i) {
      return invalid_argument(fmt::format("--decode: '{}' is not a list of token ids", text));
    }
    if (id < 0 || static_cast<size_t>(id) >= tokenizer.id_limit() || !tokenizer.id_to_token(id)) {
      return out_of_range(fmt::format("--decode: id {} is not in the vocabulary (ids go up to {})",
                                      id, tokenizer.id_limit() - 1));
    }
    ids.push_back(id);
    i = static_cast<size_t>(end - text.data());
  }
  return ids;
}

// A token as readable text: byte-level characters stay as they are in the vocabulary.
std::string shown(const Tokenizer& tokenizer, TokenId id) {
  return fmt::format("{:>8}  {}", id, tokenizer.id_to_token(id).value_or("?"));
}

int run_tokenize(const TokenizeOptions& o) {
  auto tokenizer = Tokenizer::load(o.model);
  if (!tokenizer) return fail(tokenizer.error().message());

  if (!o.decode.empty()) {
    auto ids = parse_ids(o.decode, *tokenizer);
    if (!ids) return fail(ids.error().message());
    if (o.show_tokens) {
      for (TokenId id : *ids)
        fmt::print("{}\n", shown(*tokenizer, id));
    }
    fmt::print("{}\n", tokenizer->decode(*ids, /*skip_special_tokens=*/o.no_special));
    return 0;
  }

  std::string text = o.text;
  if (!o.has_text) {
    // No text argument: read standard input, so files and pipes can be tokenized.
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  auto ids = tokenizer->encode(text, /*add_special_tokens=*/!o.no_special);
  if (!ids) return fail(ids.error().message());
  if (o.show_tokens) {
    for (TokenId id : *ids)
      fmt::print("{}\n", shown(*tokenizer, id));
  }
  fmt::print("[{}]\n", fmt::join(*ids, ", "));
  std::fprintf(stderr, "%zu tokens, %zu bytes\n", ids->size(), text.size());
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, Runner& run) {
  auto options = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand(
      "tokenize",
      "Encode text to token ids (or decode ids with --decode) with a model's tokenizer");
  cmd->add_option(
         "model", options->model,
         "Model directory (tokenizer.json, tokenizer_config.json) or a tokenizer.json file")
      ->required();
  cmd->add_option("text", options->text, "Text to encode (read from standard input when absent)")
      ->each([options](const std::string&) { options->has_text = true; });
  cmd->add_option("--decode", options->decode, "Decode these ids instead, e.g. 1,2,3");
  cmd->add_flag("--no-special", options->no_special,
                "Encode without the BOS/EOS template; decode with skip_special_tokens");
  cmd->add_flag("--tokens", options->show_tokens,
                "Also print each id with its token, one per line");
  cmd->callback([&run, options] { run = [options] { return run_tokenize(*options); }; });
}

}  // namespace locus::cli
