// A compiled Jinja template: the interpreter's entry point. Parsing and rendering return a
// Status that names the template line; no exception leaves this API. A Template is immutable
// after parse() and may be rendered from several threads at once.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/chat_template/jinja_ast.h"
#include "tokenizer/chat_template/jinja_evaluator.h"

namespace locus::jinja {

struct RenderOptions {
  RenderLimits limits;
  // What strftime_now() sees as "now"; the current time when absent.
  std::optional<std::chrono::system_clock::time_point> now;
};

class Template {
 public:
  // kParseError "syntax error at line 3: unexpected '}'" on malformed templates.
  static Expected<Template> parse(std::string_view source);

  // `variables` must be a JSON object; its members become template variables.
  // kInvalidArgument "line 7: 'dict object' has no attribute 'content'" on template errors.
  Expected<std::string> render(const nlohmann::ordered_json& variables,
                               const RenderOptions& options = {}) const;
  // The same with variables already converted (extra ones may be non-JSON values).
  Expected<std::string> render(const DictValue& variables, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Body> body) : body_(std::move(body)) {}
  std::shared_ptr<const Body> body_;
};

}  // namespace locus::jinja
