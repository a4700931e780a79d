// Chat templates as Hugging Face transformers applies them (`tokenizer.apply_chat_template(...,
// tokenize=False)`): the model's Jinja template rendered with messages, tools,
// add_generation_prompt, the special tokens and chat-template kwargs such as enable_thinking.
// Rendering must be byte-identical to transformers; tests/unit/chat_template_golden_test.cc checks
// that against prompts rendered by transformers' own code. Never throws; a template error is a
// Status the server turns into a 400.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/chat_template/jinja_template.h"

namespace locus {

// JSON values are nlohmann::ordered_json because key order is visible in the output (a tool's
// parameters rendered with tojson), and Python dicts keep the order of the request.
struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // null (the template sees None) or an array of tool definitions.
  nlohmann::ordered_json tools;
  bool add_generation_prompt = false;
  // transformers' continue_final_message: cut the prompt right after the last message's text so
  // that the model continues it. Incompatible with add_generation_prompt.
  bool continue_final_message = false;
  // chat_template_kwargs: enable_thinking, reasoning_effort, ... (a JSON object). They override
  // every other variable, as in transformers.
  nlohmann::ordered_json extra_kwargs = nlohmann::ordered_json::object();
  // Absent: the model's tokens from tokenizer_config.json when the template was loaded from a
  // model directory; otherwise the variable is undefined in the template.
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // A named template ("default", "tool_use", "rag"); empty picks as transformers does.
  std::string template_name;
  // What strftime_now() formats; the current local time when absent.
  std::optional<std::chrono::system_clock::time_point> now;
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  // One template, named "default". kParseError with the line on a syntax error.
  static Expected<ChatTemplate> parse(std::string_view source);

  Expected<std::string> render(const ChatTemplateInputs& inputs) const;

  // The source of the template render() would use for `template_name` (and tools present or not).
  Expected<std::string> source(std::string_view template_name = "", bool has_tools = false) const;
  std::vector<std::string> template_names() const;

  const std::optional<std::string>& default_bos_token() const { return bos_token_; }
  const std::optional<std::string>& default_eos_token() const { return eos_token_; }

 private:
  struct Named {
    std::string name;
    std::string source;
    jinja::Template compiled;
  };
  ChatTemplate() = default;
  Expected<const Named*> select(std::string_view template_name, bool has_tools) const;

  std::vector<Named> templates_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;

  friend Expected<ChatTemplate> load_chat_template(const std::filesystem::path& model_dir);
};

// The chat template(s) of a Hugging Face model directory, as transformers loads them:
// chat_template.jinja when present, else tokenizer_config.json's "chat_template" (a string, or a
// list of {"name", "template"}), else chat_template.json; plus additional_chat_templates/*.jinja
// as named templates. bos/eos tokens come from tokenizer_config.json.
Expected<ChatTemplate> load_chat_template(const std::filesystem::path& model_dir);

}  // namespace locus
