// The ChatTemplate API: the variables transformers passes, template selection, special tokens,
// continue_final_message, and loading templates from a model directory the way transformers does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "tokenizer/chat_template/chat_template.h"

namespace locus {
namespace {

using testing::HasSubstr;
using json = nlohmann::ordered_json;

constexpr const char* kChatMl =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

std::string render_ok(const ChatTemplate& t, const ChatTemplateInputs& inputs) {
  auto out = t.render(inputs);
  EXPECT_TRUE(out.has_value()) << out.error().to_string();
  return out.value_or("");
}

ChatTemplate parse_ok(std::string_view source) {
  auto t = ChatTemplate::parse(source);
  EXPECT_TRUE(t.has_value()) << t.error().to_string();
  return std::move(*t);
}

TEST(ChatTemplateApi, RendersMessagesAndGenerationPrompt) {
  ChatTemplate t = parse_ok(kChatMl);
  ChatTemplateInputs inputs;
  inputs.messages = json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  EXPECT_EQ(render_ok(t, inputs),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  inputs.add_generation_prompt = true;
  EXPECT_THAT(render_ok(t, inputs), testing::EndsWith("<|im_start|>assistant\n"));
}

TEST(ChatTemplateApi, VariablesAsTransformersPassesThem) {
  ChatTemplate t = parse_ok(
      "{{ tools is none }} {{ documents is none }} [{{ bos_token }}] {{ bos_token is defined }} {{ "
      "eos_token }} "
      "{{ enable_thinking }} {{ add_generation_prompt }}");
  ChatTemplateInputs inputs;
  inputs.eos_token = "</s>";
  inputs.extra_kwargs = json::parse(R"({"enable_thinking": false})");
  EXPECT_EQ(render_ok(t, inputs), "True True [] False </s> False False");
  inputs.tools = json::array();
  inputs.bos_token = "<s>";
  EXPECT_EQ(render_ok(t, inputs), "False True [<s>] True </s> False False");
  // chat_template_kwargs override everything else, as **kwargs do in transformers.
  inputs.extra_kwargs = json::parse(R"({"bos_token": "[B]", "add_generation_prompt": "yes"})");
  EXPECT_THAT(render_ok(t, inputs), HasSubstr("[[B]]"));
  EXPECT_THAT(render_ok(t, inputs), testing::EndsWith("yes"));
}

TEST(ChatTemplateApi, KeyOrderOfRequestJsonIsKept) {
  ChatTemplate t = parse_ok("{{ tools[0] | tojson }}");
  ChatTemplateInputs inputs;
  inputs.tools = json::parse(R"([{"z": 1, "a": {"y": 2.0, "b": [true, null]}, "m": "é"}])");
  EXPECT_EQ(render_ok(t, inputs), R"({"z": 1, "a": {"y": 2.0, "b": [true, null]}, "m": "é"})");
}

TEST(ChatTemplateApi, ContentPartsReachTheTemplateAsLists) {
  ChatTemplate t =
      parse_ok("{% for p in messages[0].content %}{{ p.type }}:{{ p.text }};{% endfor %}");
  ChatTemplateInputs inputs;
  inputs.messages =
      json::parse(R"([{"role": "user", "content": [)"
                  R"({"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])");
  EXPECT_EQ(render_ok(t, inputs), "text:a;text:b;");
}

TEST(ChatTemplateApi, TemplateErrorsAreStatuses) {
  ChatTemplate t =
      parse_ok("{{ raise_exception('Only user and assistant roles are supported!') }}");
  auto out = t.render({});
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(out.error().message(),
            "chat template: line 1: raise_exception: Only user and assistant roles are supported!");

  auto bad = ChatTemplate::parse("{% if %}");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kParseError);
  EXPECT_THAT(bad.error().message(), HasSubstr("chat template: syntax error at line 1"));

  ChatTemplateInputs inputs;
  inputs.extra_kwargs = json::array();
  EXPECT_EQ(parse_ok("x").render(inputs).status().code(), ErrorCode::kInvalidArgument);
}

TEST(ChatTemplateApi, ContinueFinalMessage) {
  ChatTemplate t = parse_ok(kChatMl);
  ChatTemplateInputs inputs;
  inputs.messages = json::parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Once upon "}])");
  inputs.continue_final_message = true;
  // The template kept the trailing space, so the prompt ends right after it.
  EXPECT_EQ(render_ok(t, inputs),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon ");

  ChatTemplate trimming = parse_ok("{% for m in messages %}[{{ m.content | trim }}]{% endfor %}");
  EXPECT_EQ(render_ok(trimming, inputs), "[Hi][Once upon");

  inputs.messages =
      json::parse(R"([{"role": "assistant", "content": [{"type": "text", "text": "part"}]}])");
  ChatTemplate parts = parse_ok("{{ messages[0].content[0].text }}<end>");
  EXPECT_EQ(render_ok(parts, inputs), "part");

  inputs.add_generation_prompt = true;
  EXPECT_EQ(t.render(inputs).status().code(), ErrorCode::kInvalidArgument);
}

class ModelDirectory : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("locus_chat_template_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::filesystem::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(ModelDirectory, TemplateFromTokenizerConfigWithSpecialTokens) {
  write("tokenizer_config.json",
        json{{"chat_template", "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"},
             {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
             {"eos_token", "</s>"}}
            .dump());
  auto t = load_chat_template(dir_);
  ASSERT_TRUE(t.has_value()) << t.error().to_string();
  EXPECT_EQ(t->default_bos_token(), "<s>");
  EXPECT_EQ(t->default_eos_token(), "</s>");
  ChatTemplateInputs inputs;
  inputs.messages = json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(render_ok(*t, inputs), "<s>x</s>");
  inputs.eos_token = "<eot>";  // an explicit token wins over the config's
  EXPECT_EQ(render_ok(*t, inputs), "<s>x<eot>");
}

TEST_F(ModelDirectory, ChatTemplateJinjaTakesPrecedence) {
  write("tokenizer_config.json", json{{"chat_template", "from config"}}.dump());
  write("chat_template.jinja", "from jinja file\n");
  auto t = load_chat_template(dir_);
  ASSERT_TRUE(t.has_value()) << t.error().to_string();
  EXPECT_EQ(render_ok(*t, {}), "from jinja file");
  EXPECT_EQ(t->source().value_or(""), "from jinja file\n");
}

TEST_F(ModelDirectory, NamedTemplatesSelectLikeTransformers) {
  write("tokenizer_config.json",
        json{{"chat_template", json::array({json{{"name", "default"}, {"template", "default"}},
                                            json{{"name", "tool_use"}, {"template", "tools"}}})}}
            .dump());
  write("additional_chat_templates/rag.jinja", "rag");
  auto t = load_chat_template(dir_);
  ASSERT_TRUE(t.has_value()) << t.error().to_string();
  EXPECT_THAT(t->template_names(), testing::ElementsAre("default", "tool_use", "rag"));
  ChatTemplateInputs inputs;
  EXPECT_EQ(render_ok(*t, inputs), "default");
  inputs.tools = json::array();
  EXPECT_EQ(render_ok(*t, inputs), "tools");  // tools present: "tool_use" when it exists
  inputs.template_name = "rag";
  EXPECT_EQ(render_ok(*t, inputs), "rag");
  inputs.template_name = "missing";
  EXPECT_EQ(t->render(inputs).status().code(), ErrorCode::kNotFound);
}

TEST_F(ModelDirectory, ErrorsNameTheFile) {
  auto missing = load_chat_template(dir_);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("no chat template"));

  write("tokenizer_config.json", "{not json");
  EXPECT_EQ(load_chat_template(dir_).status().code(), ErrorCode::kParseError);

  write("tokenizer_config.json", json{{"chat_template", "{% for %}"}}.dump());
  auto bad = load_chat_template(dir_);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kParseError);
  EXPECT_THAT(bad.error().message(), HasSubstr("chat template 'default'"));

  write("tokenizer_config.json", json{{"chat_template", 42}}.dump());
  EXPECT_EQ(load_chat_template(dir_).status().code(), ErrorCode::kParseError);
}

TEST_F(ModelDirectory, RealQwen3TemplateRendersThinkingSwitch) {
  std::ifstream in(std::filesystem::path(LOCUS_TEST_DATA_DIR) / "chat_templates" / "qwen3.jinja",
                   std::ios::binary);
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write("tokenizer_config.json",
        json{{"chat_template", source}, {"eos_token", "<|im_end|>"}}.dump());
  auto t = load_chat_template(dir_);
  ASSERT_TRUE(t.has_value()) << t.error().to_string();
  ChatTemplateInputs inputs;
  inputs.messages = json::parse(R"([{"role": "user", "content": "Hi"}])");
  inputs.add_generation_prompt = true;
  inputs.extra_kwargs = json::parse(R"({"enable_thinking": false})");
  EXPECT_EQ(render_ok(*t, inputs),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

}  // namespace
}  // namespace locus
