// Errors as values: fallible calls across module boundaries return Status or Result<T> instead of
// throwing, so every caller sees the failure and the message a user can act on.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ft {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // bad input from the user or a client
  kNotFound,         // a file, tensor, key or model that does not exist
  kUnsupported,      // valid input we do not handle (yet): architecture, dtype, feature
  kCorrupt,          // data that fails a checksum, a bound or a format check
  kIo,               // the operating system said no
  kUnavailable,      // no device, overloaded, shutting down: try again later or elsewhere
  kInternal,         // a bug: an invariant did not hold
};

const char* error_code_name(ErrorCode code);

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>"
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status corrupt(std::string m) { return {ErrorCode::kCorrupt, std::move(m)}; }
inline Status io_error(std::string m) { return {ErrorCode::kIo, std::move(m)}; }
inline Status unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status internal_error(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                      // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }  // NOLINT

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ft

// Propagate a failed Status/Result from the current function.
#define FT_CONCAT_INNER(a, b) a##b
#define FT_CONCAT(a, b) FT_CONCAT_INNER(a, b)
#define FT_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::ft::Status ft_status_ = (expr);           \
    if (!ft_status_.is_ok()) return ft_status_; \
  } while (0)
#define FT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.is_ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
#define FT_ASSIGN_OR_RETURN(lhs, expr) FT_ASSIGN_OR_RETURN_IMPL(FT_CONCAT(ft_result_, __LINE__), lhs, expr)
