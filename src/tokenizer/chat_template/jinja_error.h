// The exception the Jinja interpreter throws internally. It never leaves the interpreter: the
// public entry points (jinja_template.h) catch it and return a Status.
#pragma once

#include <stdexcept>
#include <string>

namespace locus::jinja {

enum class TemplateErrorKind {
  kSyntax,     // the template text does not parse
  kUndefined,  // jinja2.UndefinedError
  kType,       // TypeError / ValueError / ZeroDivisionError from an operation or filter
  kRaised,     // the template called raise_exception(message)
  kSecurity,   // the sandbox refused an operation (list.append, a private attribute)
  kLimit,      // output size, loop steps or recursion past the configured limits
};

class TemplateError : public std::runtime_error {
 public:
  TemplateError(TemplateErrorKind kind, const std::string& message, int line = 0)
      : std::runtime_error(message), kind_(kind), line_(line) {}

  TemplateErrorKind kind() const { return kind_; }
  int line() const { return line_; }
  void set_line(int line) { line_ = line; }

 private:
  TemplateErrorKind kind_;
  int line_;
};

[[noreturn]] inline void throw_type_error(const std::string& message) {
  throw TemplateError(TemplateErrorKind::kType, message);
}

[[noreturn]] inline void throw_undefined_error(const std::string& message) {
  throw TemplateError(TemplateErrorKind::kUndefined, message);
}

}  // namespace locus::jinja
