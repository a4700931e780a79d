// Every real chat template (tests/fixtures/chat_templates/*.jinja) rendered over every conversation
// in conversations.json must be byte-identical to what transformers renders
// (golden/<model>.json, written by tools/golden/chat_template/golden_python.py), and must fail
// where transformers fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/chat_template/chat_template.h"

namespace locus {
namespace {

const std::filesystem::path kDir = std::filesystem::path(LOCUS_TEST_DATA_DIR) / "chat_templates";

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::ordered_json read_json(const std::filesystem::path& path) {
  return nlohmann::ordered_json::parse(read_text(path));
}

struct GoldenCase {
  std::string model;
  std::string name;
};

std::vector<GoldenCase> all_cases() {
  std::vector<GoldenCase> cases;
  const auto models = read_json(kDir / "models.json");
  for (const auto& [model, spec] : models.items()) {
    const auto golden = read_json(kDir / "golden" / (model + ".json"));
    for (const auto& golden_case : golden["cases"]) {
      cases.push_back({model, golden_case["name"].get<std::string>()});
    }
  }
  return cases;
}

const nlohmann::ordered_json& find_by_name(const nlohmann::ordered_json& list,
                                           const std::string& name) {
  for (const auto& item : list) {
    if (item["name"] == name) return item;
  }
  static const nlohmann::ordered_json kMissing;
  return kMissing;
}

// "first difference at byte 120: ...<context>..." so a failure is readable without a diff tool.
std::string first_difference(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i])
    ++i;
  size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  expected: ..." +
         nlohmann::json(expected.substr(from, 120)).dump() + "\n  actual:   ..." +
         nlohmann::json(actual.substr(from, 120)).dump();
}

class ChatTemplateGolden : public testing::TestWithParam<GoldenCase> {
 protected:
  // strftime_now() formats local time; the goldens were rendered in UTC.
  static void SetUpTestSuite() {
    setenv("TZ", "UTC", 1);
    tzset();
  }
};

TEST_P(ChatTemplateGolden, MatchesTransformers) {
  const GoldenCase& param = GetParam();
  const auto spec = read_json(kDir / "models.json")[param.model];
  const auto golden_file = read_json(kDir / "golden" / (param.model + ".json"));
  const auto& golden = find_by_name(golden_file["cases"], param.name);
  const auto conversations = read_json(kDir / "conversations.json");
  const auto& conversation = find_by_name(conversations, param.name);
  ASSERT_FALSE(conversation.is_null()) << "conversation " << param.name << " missing";

  auto chat_template = ChatTemplate::parse(read_text(kDir / spec["template"].get<std::string>()));
  ASSERT_TRUE(chat_template.has_value()) << chat_template.error().to_string();

  ChatTemplateInputs inputs;
  inputs.messages = conversation["messages"];
  if (conversation.contains("tools")) inputs.tools = conversation["tools"];
  inputs.add_generation_prompt = conversation["add_generation_prompt"].get<bool>();
  inputs.continue_final_message = conversation.value("continue_final_message", false);
  if (conversation.contains("kwargs")) inputs.extra_kwargs = conversation["kwargs"];
  if (spec["bos_token"].is_string()) inputs.bos_token = spec["bos_token"].get<std::string>();
  if (spec["eos_token"].is_string()) inputs.eos_token = spec["eos_token"].get<std::string>();
  inputs.now = std::chrono::system_clock::from_time_t(golden_file["now"].get<std::time_t>());

  auto rendered = chat_template->render(inputs);
  if (golden.contains("output")) {
    ASSERT_TRUE(rendered.has_value()) << rendered.error().to_string();
    const std::string expected = golden["output"].get<std::string>();
    EXPECT_TRUE(*rendered == expected) << first_difference(expected, *rendered);
  } else {
    ASSERT_FALSE(rendered.has_value())
        << "transformers fails with " << golden["error_type"].get<std::string>() << ": "
        << golden["error"].get<std::string>() << "\nbut locus rendered:\n"
        << *rendered;
    const std::string type = golden["error_type"].get<std::string>();
    // Template-raised and undefined-value errors carry jinja2's own words; keep them identical.
    if (type == "TemplateError" || type == "UndefinedError") {
      EXPECT_THAT(rendered.error().message(),
                  testing::HasSubstr(golden["error"].get<std::string>()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatTemplateGolden, testing::ValuesIn(all_cases()),
                         [](const testing::TestParamInfo<GoldenCase>& param_info) {
                           return param_info.param.model + "_" + param_info.param.name;
                         });

TEST(ChatTemplateGoldenData, EveryModelHasAGoldenForEveryConversation) {
  const auto conversations = read_json(kDir / "conversations.json");
  const auto models = read_json(kDir / "models.json");
  for (const auto& [model, spec] : models.items()) {
    const auto golden = read_json(kDir / "golden" / (model + ".json"));
    EXPECT_EQ(golden["cases"].size(), conversations.size()) << model;
    EXPECT_TRUE(std::filesystem::exists(kDir / spec["template"].get<std::string>())) << model;
  }
}

}  // namespace
}  // namespace locus
