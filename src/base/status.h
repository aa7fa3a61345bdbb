// Errors as values: Status for operations without a result, Expected<T> for those with one.
// An error is one human-readable line that names what failed (the file, the tensor, the flag).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace lockstep {

struct Error {
  std::string message;
};

// Either a value or an Error. Check ok() before value(); value() on an error aborts.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}
  Expected(Error error) : state_(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<T>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<Error>(state_);
  }

 private:
  std::variant<T, Error> state_;
};

// Success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error.message)), failed_(true) {}

  static Status success() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return error_; }
  Error error() const { return Error{error_}; }

 private:
  std::string error_;
  bool failed_ = false;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

}  // namespace lockstep

// Returns the error of an Expected or Status expression from the enclosing function.
#define LOCKSTEP_TRY(expr)                               \
  do {                                                   \
    auto&& lockstep_try_result_ = (expr);                \
    if (!lockstep_try_result_.ok())                      \
      return ::lockstep::Error{lockstep_try_result_.error()}; \
  } while (0)
