// Status and Expected<T>: the error type that crosses every module boundary in locus.
// Exceptions never cross a module boundary; a function that can fail returns one of these, and
// its message names what failed and where (file, tensor, field) so a user can act on it.
#pragma once

#include <cassert>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace locus {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // bad input from a user, a request or a file
  kNotFound,         // a file, tensor, field or route that does not exist
  kOutOfRange,       // a value or offset outside what is allowed
  kIoError,          // open/read/mmap/write failed at the OS level
  kParseError,       // syntactically malformed data (JSON, headers)
  kUnsupported,      // valid input that locus does not implement (architecture, dtype, backend)
  kResourceExhausted,
  kInternal,  // a broken invariant inside locus: a bug
};

std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: <message>"; "ok" for success.
  std::string to_string() const;

  // Adds context in front of the message: "<context>: <old message>". Keeps the code.
  Status with_context(std::string_view context) const&;
  Status with_context(std::string_view context) &&;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) {
  return {ErrorCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) {
  return {ErrorCode::kNotFound, std::move(m)};
}
inline Status out_of_range(std::string m) {
  return {ErrorCode::kOutOfRange, std::move(m)};
}
inline Status io_error(std::string m) {
  return {ErrorCode::kIoError, std::move(m)};
}
inline Status parse_error(std::string m) {
  return {ErrorCode::kParseError, std::move(m)};
}
inline Status unsupported(std::string m) {
  return {ErrorCode::kUnsupported, std::move(m)};
}
inline Status resource_exhausted(std::string m) {
  return {ErrorCode::kResourceExhausted, std::move(m)};
}
inline Status internal_error(std::string m) {
  return {ErrorCode::kInternal, std::move(m)};
}

// A value or the Status saying why there is none. Constructing from an ok Status is a bug.
template <typename T>
class [[nodiscard]] Expected {
  static_assert(!std::is_same_v<std::remove_cvref_t<T>, Status>, "Expected<Status> is meaningless");

 public:
  Expected(T value) : data_(std::in_place_index<0>, std::move(value)) {}        // NOLINT: implicit
  Expected(Status status) : data_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    if (std::get<1>(data_).is_ok()) {
      std::get<1>(data_) = internal_error("Expected constructed from an ok Status");
    }
  }
  // Converting constructor (e.g. Expected<std::string> from a const char*). The constraint
  // keeps it from hiding the copy/move constructors.
  template <typename U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::remove_cvref_t<U>, T> &&
           !std::is_same_v<std::remove_cvref_t<U>, Expected> &&
           !std::is_same_v<std::remove_cvref_t<U>, Status>)
      // NOLINTNEXTLINE(bugprone-forwarding-reference-overload, google-explicit-constructor)
      Expected(U&& value)
      : data_(std::in_place_index<0>, T(std::forward<U>(value))) {}

  bool has_value() const { return data_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return checked(); }
  const T& value() const& { return const_cast<Expected*>(this)->checked(); }
  T&& value() && { return std::move(checked()); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return const_cast<Expected*>(this)->checked(); }
  T&& operator*() && { return std::move(checked()); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &const_cast<Expected*>(this)->checked(); }

  // The error; Status::ok() when a value is held.
  Status status() const { return has_value() ? Status::ok() : std::get<1>(data_); }
  const Status& error() const { return std::get<1>(data_); }

  template <typename U>
  T value_or(U&& fallback) const& {
    return has_value() ? std::get<0>(data_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  T& checked() {
    if (!has_value()) {
      // Reading the value of an error is a programming bug; fail loudly, never UB.
      std::abort();
    }
    return std::get<0>(data_);
  }
  std::variant<T, Status> data_;
};

namespace detail {
inline Status to_status(Status s) {
  return s;
}
template <typename T>
Status to_status(const Expected<T>& e) {
  return e.status();
}
}  // namespace detail

}  // namespace locus

#define LOCUS_CONCAT_INNER(a, b) a##b
#define LOCUS_CONCAT(a, b) LOCUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is an error.
#define LOCUS_RETURN_IF_ERROR(expr)                                   \
  do {                                                                \
    ::locus::Status locus_status_ = ::locus::detail::to_status(expr); \
    if (!locus_status_.is_ok()) return locus_status_;                 \
  } while (0)

// `LOCUS_ASSIGN_OR_RETURN(auto x, make_x());` declares x from an Expected or returns its error.
// `lhs` is a declaration, so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define LOCUS_ASSIGN_OR_RETURN(lhs, expr) \
  LOCUS_ASSIGN_OR_RETURN_IMPL(LOCUS_CONCAT(locus_expected_, __LINE__), lhs, expr)
#define LOCUS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.has_value()) return tmp.error();         \
  lhs = std::move(*tmp)
// NOLINTEND(bugprone-macro-parentheses)
