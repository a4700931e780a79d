// ChatTemplate: template selection, variables as transformers passes them, and loading from a
// model directory (see chat_template.h).
#include "tokenizer/chat_template/chat_template.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tokenizer/chat_template/jinja_json.h"
#include "tokenizer/chat_template/python_text.h"

namespace locus {
namespace {

Expected<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path.string() + ": cannot open");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return io_error(path.string() + ": read failed");
  return buffer.str();
}

Expected<nlohmann::ordered_json> read_json(const std::filesystem::path& path) {
  LOCUS_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto json = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return parse_error(path.string() + ": not valid JSON");
  return json;
}

// A special token in tokenizer_config.json: "<s>" or {"content": "<s>", ...} (AddedToken).
std::optional<std::string> special_token(const nlohmann::ordered_json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return std::nullopt;
}

std::string python_strip(const std::string& s, bool left, bool right) {
  return jinja::text::strip(s, std::nullopt, left, right);
}

// transformers' continue_final_message: keep the prompt up to the end of the final message's text.
Expected<std::string> cut_after_final_message(std::string rendered,
                                              const nlohmann::ordered_json& messages) {
  if (!messages.is_array() || messages.empty() || !messages.back().is_object()) {
    return invalid_argument("continue_final_message is set but there is no final message");
  }
  const auto& content =
      messages.back().contains("content") ? messages.back()["content"] : nlohmann::ordered_json();
  std::string final_text;
  if (content.is_string()) {
    final_text = content.get<std::string>();
  } else if (content.is_array()) {
    bool found = false;
    for (auto it = content.rbegin(); it != content.rend(); ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        final_text = (*it)["text"].get<std::string>();
        found = true;
        break;
      }
    }
    if (!found)
      return invalid_argument(
          "continue_final_message is set but we could not find any text to continue in the final "
          "message!");
  } else {
    return invalid_argument(
        "continue_final_message is set but the final message has no text content");
  }
  std::string stripped = python_strip(final_text, true, true);
  size_t location = rendered.rfind(stripped);
  if (location == std::string::npos) {
    return invalid_argument(
        "continue_final_message is set but the final message does not appear in the chat after "
        "applying the chat template!");
  }
  // When the template kept the message verbatim (trailing whitespace included) keep all of it,
  // otherwise stop after its stripped text.
  std::string left_stripped = python_strip(final_text, true, false);
  bool verbatim = left_stripped.size() == final_text.size() &&
                  rendered.compare(location, final_text.size(), final_text) == 0;
  rendered.resize(location + (verbatim ? left_stripped.size() : stripped.size()));
  return rendered;
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  auto compiled = jinja::Template::parse(source);
  if (!compiled) return compiled.error().with_context("chat template");
  ChatTemplate result;
  result.templates_.push_back(Named{"default", std::string(source), std::move(*compiled)});
  return result;
}

std::vector<std::string> ChatTemplate::template_names() const {
  std::vector<std::string> names;
  for (const Named& t : templates_)
    names.push_back(t.name);
  return names;
}

Expected<const ChatTemplate::Named*> ChatTemplate::select(std::string_view template_name,
                                                          bool has_tools) const {
  auto find = [&](std::string_view name) -> const Named* {
    for (const Named& t : templates_) {
      if (t.name == name) return &t;
    }
    return nullptr;
  };
  if (!template_name.empty()) {
    if (const Named* t = find(template_name)) return t;
    return not_found("chat template '" + std::string(template_name) + "' does not exist");
  }
  if (has_tools) {
    if (const Named* t = find("tool_use")) return t;
  }
  if (const Named* t = find("default")) return t;
  if (templates_.size() == 1) return &templates_[0];
  return invalid_argument(
      "this model has multiple chat templates and none is named 'default'; choose one by name");
}

Expected<std::string> ChatTemplate::source(std::string_view template_name, bool has_tools) const {
  LOCUS_ASSIGN_OR_RETURN(const Named* chosen, select(template_name, has_tools));
  return chosen->source;
}

Expected<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (!inputs.extra_kwargs.is_null() && !inputs.extra_kwargs.is_object()) {
    return invalid_argument("chat_template_kwargs must be a JSON object");
  }
  if (inputs.continue_final_message && inputs.add_generation_prompt) {
    return invalid_argument("continue_final_message and add_generation_prompt are not compatible");
  }
  bool has_tools = !inputs.tools.is_null();
  LOCUS_ASSIGN_OR_RETURN(const Named* chosen, select(inputs.template_name, has_tools));

  // The variables transformers passes: messages, tools, documents, add_generation_prompt, the
  // special tokens, then the caller's kwargs on top.
  jinja::DictValue variables;
  variables.set(jinja::Value("messages"), jinja::value_from_json(inputs.messages));
  variables.set(jinja::Value("tools"), jinja::value_from_json(inputs.tools));
  variables.set(jinja::Value("documents"), jinja::Value::none());
  variables.set(jinja::Value("add_generation_prompt"), jinja::Value(inputs.add_generation_prompt));
  const std::optional<std::string>& bos = inputs.bos_token ? inputs.bos_token : bos_token_;
  const std::optional<std::string>& eos = inputs.eos_token ? inputs.eos_token : eos_token_;
  if (bos) variables.set(jinja::Value("bos_token"), jinja::Value(*bos));
  if (eos) variables.set(jinja::Value("eos_token"), jinja::Value(*eos));
  if (inputs.extra_kwargs.is_object()) {
    for (const auto& [key, value] : inputs.extra_kwargs.items()) {
      variables.set(jinja::Value(key), jinja::value_from_json(value));
    }
  }
  jinja::RenderOptions options;
  options.limits = inputs.limits;
  options.now = inputs.now;
  auto rendered = chosen->compiled.render(variables, options);
  if (!rendered) return rendered.error().with_context("chat template");
  if (!inputs.continue_final_message) return rendered;
  return cut_after_final_message(std::move(*rendered), inputs.messages);
}

Expected<ChatTemplate> load_chat_template(const std::filesystem::path& model_dir) {
  ChatTemplate result;
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> sources;  // name, source

  const auto config_path = model_dir / "tokenizer_config.json";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (std::filesystem::exists(config_path, ec)) {
    LOCUS_ASSIGN_OR_RETURN(config, read_json(config_path));
    if (!config.is_object()) return parse_error(config_path.string() + ": expected a JSON object");
    result.bos_token_ = special_token(config, "bos_token");
    result.eos_token_ = special_token(config, "eos_token");
  }

  const auto jinja_path = model_dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja_path, ec)) {
    LOCUS_ASSIGN_OR_RETURN(std::string text, read_file(jinja_path));
    sources.emplace_back("default", std::move(text));
  } else if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    const auto& entry = config["chat_template"];
    if (entry.is_string()) {
      sources.emplace_back("default", entry.get<std::string>());
    } else if (entry.is_array()) {
      for (const auto& item : entry) {
        if (!item.is_object() || !item.contains("name") || !item.contains("template") ||
            !item["name"].is_string() || !item["template"].is_string()) {
          return parse_error(
              config_path.string() +
              ": \"chat_template\" list entries need string \"name\" and \"template\"");
        }
        sources.emplace_back(item["name"].get<std::string>(), item["template"].get<std::string>());
      }
    } else {
      return parse_error(config_path.string() + ": \"chat_template\" must be a string or a list");
    }
  } else if (std::filesystem::exists(model_dir / "chat_template.json", ec)) {
    LOCUS_ASSIGN_OR_RETURN(auto json, read_json(model_dir / "chat_template.json"));
    if (json.is_object() && json.contains("chat_template") && json["chat_template"].is_string()) {
      sources.emplace_back("default", json["chat_template"].get<std::string>());
    }
  }

  const auto extra_dir = model_dir / "additional_chat_templates";
  if (std::filesystem::is_directory(extra_dir, ec)) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(extra_dir, ec)) {
      if (entry.path().extension() == ".jinja") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      LOCUS_ASSIGN_OR_RETURN(std::string text, read_file(file));
      sources.emplace_back(file.stem().string(), std::move(text));
    }
  }

  if (sources.empty()) {
    return not_found(model_dir.string() +
                     ": no chat template (no chat_template.jinja and no \"chat_template\" in "
                     "tokenizer_config.json)");
  }
  for (auto& [name, text] : sources) {
    auto compiled = jinja::Template::parse(text);
    if (!compiled)
      return compiled.error().with_context(model_dir.string() + ": chat template '" + name + "'");
    result.templates_.push_back(ChatTemplate::Named{name, std::move(text), std::move(*compiled)});
  }
  return result;
}

}  // namespace locus
