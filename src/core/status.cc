#include "core/status.h"

namespace locus {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kOutOfRange:
      return "out_of_range";
    case ErrorCode::kIoError:
      return "io_error";
    case ErrorCode::kParseError:
      return "parse_error";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kResourceExhausted:
      return "resource_exhausted";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string out(error_code_name(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::with_context(std::string_view context) const& {
  if (is_ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return {code_, std::move(m)};
}

Status Status::with_context(std::string_view context) && {
  if (is_ok()) return std::move(*this);
  std::string m(context);
  m += ": ";
  m += message_;
  message_ = std::move(m);
  return std::move(*this);
}

}  // namespace locus
