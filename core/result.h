// Result<T>: errors at boundaries (files, user input) as values with a code, a message that
// names the file / dataset / argument and the problem, and a hint for the user.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace attnscope {

enum class ErrorCode {
  io,           // cannot open / read / write
  format,       // not a valid dump (wrong type, rank, shape, schema)
  unsupported,  // valid but refused (external links, virtual datasets, ...)
  too_large,    // sizes beyond the memory budget or overflowing 64 bits
  invalid_argument,
  not_found,
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::io;
  std::string message;  // "FILE: /case/q: problem"
  std::string hint;     // what the user can do about it

  // "message (hint: ...)" on one line.
  std::string describe() const;
};

template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Result of an operation that yields nothing on success.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(ErrorCode code, std::string message, std::string hint = {}) {
  return Error{code, std::move(message), std::move(hint)};
}

}  // namespace attnscope
