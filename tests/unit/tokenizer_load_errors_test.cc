// Malformed or unsupported tokenizer.json / tokenizer_config.json: every failure is an error
// (never a crash, never a silent fallback) whose message names the file's field and, for an
// unsupported component, its type.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "tokenizer/tokenizer.h"

namespace locus {
namespace {

using nlohmann::json;

json minimal() {
  return {
      {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}}},
      {"added_tokens", json::array()}};
}

// Loads `tokenizer_json` (and `config`) and returns the error message, expecting `code`.
std::string error_of(const std::string& tokenizer_json, ErrorCode code,
                     const std::string& config = "") {
  auto tokenizer = Tokenizer::from_json(tokenizer_json, config);
  EXPECT_FALSE(tokenizer.has_value());
  if (tokenizer.has_value()) return "";
  EXPECT_EQ(tokenizer.error().code(), code) << tokenizer.error().to_string();
  return tokenizer.error().message();
}

std::string error_of(const json& tokenizer_json, ErrorCode code, const std::string& config = "") {
  return error_of(tokenizer_json.dump(), code, config);
}

#define EXPECT_MENTIONS(message, text) \
  EXPECT_NE((message).find(text), std::string::npos) << "message: " << (message)

TEST(TokenizerLoadErrors, MinimalLoads) {
  EXPECT_TRUE(Tokenizer::from_json(minimal().dump()).has_value());
}

TEST(TokenizerLoadErrors, NotJson) {
  auto message = error_of(std::string("{\"model\": "), ErrorCode::kParseError);
  EXPECT_MENTIONS(message, "tokenizer.json: not valid JSON");
}

TEST(TokenizerLoadErrors, ModelProblems) {
  json no_model = minimal();
  no_model.erase("model");
  EXPECT_MENTIONS(error_of(no_model, ErrorCode::kParseError), "tokenizer.json: model: missing");

  json unigram = minimal();
  unigram["model"]["type"] = "Unigram";
  auto message = error_of(unigram, ErrorCode::kUnsupported);
  EXPECT_MENTIONS(message, "model.type: 'Unigram' is not supported");

  json bad_vocab = minimal();
  bad_vocab["model"]["vocab"] = json::array({"a", "b"});
  EXPECT_MENTIONS(error_of(bad_vocab, ErrorCode::kParseError), "model.vocab: expected an object");

  json bad_id = minimal();
  bad_id["model"]["vocab"]["b"] = "one";
  EXPECT_MENTIONS(error_of(bad_id, ErrorCode::kParseError),
                  "model.vocab[\"b\"]: expected an integer id");

  json unknown_merge = minimal();
  unknown_merge["model"]["merges"] = {"a b", "a x"};
  EXPECT_MENTIONS(error_of(unknown_merge, ErrorCode::kNotFound),
                  "model.merges[1]: token 'x' is not in the vocabulary");

  json merged_missing = minimal();
  merged_missing["model"]["merges"] = {"b a"};
  EXPECT_MENTIONS(error_of(merged_missing, ErrorCode::kNotFound),
                  "model.merges[0]: merged token 'ba' is not in the vocabulary");

  json three_parts = minimal();
  three_parts["model"]["merges"] = {"a b c"};
  EXPECT_MENTIONS(error_of(three_parts, ErrorCode::kParseError),
                  "model.merges[0]: 'a b c' is not two tokens separated by one space");

  json bad_pair = minimal();
  bad_pair["model"]["merges"] = json::array({json::array({"a"})});
  EXPECT_MENTIONS(error_of(bad_pair, ErrorCode::kParseError), "model.merges[0]: expected");

  json bad_flag = minimal();
  bad_flag["model"]["byte_fallback"] = "yes";
  EXPECT_MENTIONS(error_of(bad_flag, ErrorCode::kParseError),
                  "model.byte_fallback: expected a boolean");
}

TEST(TokenizerLoadErrors, ComponentProblems) {
  json normalizer = minimal();
  normalizer["normalizer"] = {{"type", "Sequence"},
                              {"normalizers", {{{"type", "NFC"}}, {{"kind", "NFC"}}}}};
  EXPECT_MENTIONS(error_of(normalizer, ErrorCode::kParseError),
                  "normalizer.normalizers[1]: normalizer has no \"type\"");

  json pre_tokenizer = minimal();
  pre_tokenizer["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "(open"}}}, {"behavior", "Isolated"}}}}};
  auto message = error_of(pre_tokenizer, ErrorCode::kParseError);
  EXPECT_MENTIONS(message, "pre_tokenizer.pretokenizers[0].pattern.Regex");
  EXPECT_MENTIONS(message, "(open");

  json no_pattern = minimal();
  no_pattern["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Glob", "*"}}}, {"behavior", "Isolated"}};
  EXPECT_MENTIONS(error_of(no_pattern, ErrorCode::kParseError), "pre_tokenizer.pattern");

  json unigram_pre = minimal();
  unigram_pre["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  EXPECT_MENTIONS(error_of(unigram_pre, ErrorCode::kUnsupported),
                  "pre_tokenizer: pre-tokenizer type 'UnicodeScripts' is not supported");

  json post = minimal();
  post["post_processor"] = {{"type", "TemplateProcessing"},
                            {"single",
                             {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                            {"special_tokens", json::object()}};
  EXPECT_MENTIONS(error_of(post, ErrorCode::kNotFound),
                  "post_processor.single[0]: special token '<s>'");

  json roberta = minimal();
  roberta["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_MENTIONS(error_of(roberta, ErrorCode::kUnsupported),
                  "post-processor type 'RobertaProcessing'");

  json decoder = minimal();
  decoder["decoder"] = {{"type", "Sequence"},
                        {"decoders", {{{"type", "Fuse"}}, {{"type", "WordPiece"}}}}};
  EXPECT_MENTIONS(error_of(decoder, ErrorCode::kUnsupported),
                  "decoder.decoders[1]: decoder type 'WordPiece' is not supported");
}

TEST(TokenizerLoadErrors, AddedTokenProblems) {
  json no_id = minimal();
  no_id["added_tokens"] = {{{"content", "<s>"}}};
  EXPECT_MENTIONS(error_of(no_id, ErrorCode::kParseError), "added_tokens[0].id: missing");
  json bad_content = minimal();
  bad_content["added_tokens"] = {{{"id", 5}, {"content", 5}}};
  EXPECT_MENTIONS(error_of(bad_content, ErrorCode::kParseError),
                  "added_tokens[0].content: expected a string");
}

TEST(TokenizerLoadErrors, ConfigProblems) {
  auto message = error_of(minimal(), ErrorCode::kParseError, R"({"bos_token": 3})");
  EXPECT_MENTIONS(
      message, "tokenizer_config.json: bos_token: expected a string, an AddedToken object or null");
  EXPECT_MENTIONS(error_of(minimal(), ErrorCode::kParseError, "{"),
                  "tokenizer_config.json: not valid JSON");
  EXPECT_MENTIONS(error_of(minimal(), ErrorCode::kNotFound,
                           R"({"add_bos_token": true, "bos_token": "<nope>"})"),
                  "bos_token '<nope>' is not in the vocabulary");
  EXPECT_MENTIONS(
      error_of(minimal(), ErrorCode::kParseError, R"({"added_tokens_decoder": {"x": {}}})"),
      "added_tokens_decoder[\"x\"]: key is not a token id");
}

TEST(TokenizerLoadErrors, FilesAndFolders) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / "locus_tokenizer_load_errors";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto missing = Tokenizer::load(dir);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_MENTIONS(missing.error().message(), "no tokenizer.json");

  std::ofstream(dir / "tokenizer.json") << minimal().dump();
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"eos_token": "b", "chat_template": "{{ x }}"})";
  auto loaded = Tokenizer::load(dir);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message();
  EXPECT_EQ(loaded->eos_token_id(), 1);
  EXPECT_EQ(loaded->config().chat_template, "{{ x }}");
  std::ofstream(dir / "chat_template.jinja") << "{{ y }}";
  auto with_jinja = Tokenizer::load(dir / "tokenizer.json");
  ASSERT_TRUE(with_jinja.has_value());
  EXPECT_EQ(with_jinja->config().chat_template, "{{ y }}");

  std::ofstream(dir / "tokenizer.json") << "[1, 2";
  auto broken = Tokenizer::load(dir);
  ASSERT_FALSE(broken.has_value());
  EXPECT_MENTIONS(broken.error().message(), (dir / "tokenizer.json").string());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace locus
