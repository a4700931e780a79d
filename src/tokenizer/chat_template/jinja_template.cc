// Template: parse and render with errors turned into Status (see jinja_template.h).
#include "tokenizer/chat_template/jinja_template.h"

#include <exception>
#include <new>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_json.h"
#include "tokenizer/chat_template/jinja_parser.h"

namespace locus::jinja {
namespace {

std::string with_line(const std::string& message, int line) {
  return line > 0 ? "line " + std::to_string(line) + ": " + message : message;
}

Status render_error(const TemplateError& error, int fallback_line) {
  int line = error.line() > 0 ? error.line() : fallback_line;
  switch (error.kind()) {
    case TemplateErrorKind::kRaised:
      return invalid_argument(with_line("raise_exception: " + std::string(error.what()), line));
    case TemplateErrorKind::kSecurity:
      return invalid_argument(with_line("sandbox: " + std::string(error.what()), line));
    case TemplateErrorKind::kLimit:
      return resource_exhausted(with_line(error.what(), line));
    case TemplateErrorKind::kSyntax:
      return parse_error(with_line(error.what(), line));
    default:
      return invalid_argument(with_line(error.what(), line));
  }
}

}  // namespace

Expected<Template> Template::parse(std::string_view source) {
  try {
    return Template(std::make_shared<const Body>(parse_template(source)));
  } catch (const TemplateError& e) {
    return parse_error("syntax error at line " + std::to_string(e.line()) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return resource_exhausted("out of memory while parsing the template");
  } catch (const std::exception& e) {
    return internal_error(std::string("template parser failed: ") + e.what());
  }
}

Expected<std::string> Template::render(const nlohmann::ordered_json& variables,
                                       const RenderOptions& options) const {
  if (!variables.is_object()) return invalid_argument("template variables must be a JSON object");
  DictValue globals;
  for (const auto& [key, value] : variables.items())
    globals.set(Value(key), value_from_json(value));
  return render(globals, options);
}

Expected<std::string> Template::render(const DictValue& variables,
                                       const RenderOptions& options) const {
  std::time_t now =
      std::chrono::system_clock::to_time_t(options.now.value_or(std::chrono::system_clock::now()));
  Evaluator evaluator(variables, options.limits, now);
  try {
    return evaluator.render(*body_);
  } catch (const TemplateError& e) {
    return render_error(e, evaluator.current_line());
  } catch (const std::bad_alloc&) {
    return resource_exhausted(
        with_line("out of memory while rendering the template", evaluator.current_line()));
  } catch (const std::exception& e) {
    return internal_error(
        with_line(std::string("template renderer failed: ") + e.what(), evaluator.current_line()));
  }
}

}  // namespace locus::jinja
