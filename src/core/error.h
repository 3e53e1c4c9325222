// Error, Status and Result<T>: failures as values that cannot be dropped silently.
// Not exceptions: nothing in kvforge throws. Only cli/main turns an error into an exit code.
// Debug builds (no NDEBUG) abort when a failed Status/Result is destroyed unchecked.
#pragma once

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kvf {

// Chosen by what the caller does next, not by where the failure happened.
enum class ErrorCode {
  kInvalidInput,  // the caller's data or arguments are wrong: fix them and retry
  kUnsupported,   // well-formed, but this build/target cannot do it: pick another path
  kCapacity,      // out of room (cache, pool, arena): free something or shrink the request
  kValidation,    // a graph's validation witness failed at run time; nothing was published
  kInternal,      // a kvforge bug: report it
};

std::string_view error_code_name(ErrorCode code);

// Concatenates anything streamable; keeps error sites on one line.
template <class... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// A failure: a code and a one-line message naming the field/file and what was expected.
class Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "code: message", for logs and the CLI.
  std::string to_string() const;

  // Prefixes the message with where it happened: "loading x.gguf: <message>".
  template <class... Parts>
  Error context(const Parts&... parts) && {
    message_ = str_cat(parts..., ": ", message_);
    return std::move(*this);
  }
  template <class... Parts>
  Error context(const Parts&... parts) const& {
    Error copy = *this;
    return std::move(copy).context(parts...);
  }

 private:
  ErrorCode code_;
  std::string message_;
};

template <class... Parts>
Error invalid_input(const Parts&... parts) { return Error(ErrorCode::kInvalidInput, str_cat(parts...)); }
template <class... Parts>
Error unsupported(const Parts&... parts) { return Error(ErrorCode::kUnsupported, str_cat(parts...)); }
template <class... Parts>
Error capacity(const Parts&... parts) { return Error(ErrorCode::kCapacity, str_cat(parts...)); }
template <class... Parts>
Error internal_error(const Parts&... parts) { return Error(ErrorCode::kInternal, str_cat(parts...)); }

namespace detail {
[[noreturn]] void die_unchecked(const Error& e);
[[noreturn]] void die_bad_access(const char* what);
#ifdef NDEBUG
inline constexpr bool kCheckErrors = false;
#else
inline constexpr bool kCheckErrors = true;
#endif
}  // namespace detail

// Either success or an Error. Move-only; a failure must be looked at before it dies.
class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  Status(Error e) : error_(std::move(e)) {}
  Status(Status&& o) noexcept : error_(std::move(o.error_)), checked_(o.checked_) { o.checked_ = true; }
  Status& operator=(Status&& o) noexcept {
    check_on_destroy();
    error_ = std::move(o.error_);
    checked_ = o.checked_;
    o.checked_ = true;
    return *this;
  }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;
  ~Status() { check_on_destroy(); }

  bool ok() const { checked_ = true; return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const {
    if (!error_) detail::die_bad_access("Status::error() on success");
    return *error_;
  }
  Error take_error() {
    checked_ = true;
    if (!error_) detail::die_bad_access("Status::take_error() on success");
    return std::move(*error_);
  }
  // Explicitly drops a failure (the LLVM consumeError idiom).
  void ignore() const { checked_ = true; }

 private:
  void check_on_destroy() const {
    if (detail::kCheckErrors && !checked_ && error_) detail::die_unchecked(*error_);
  }
  std::optional<Error> error_;
  mutable bool checked_ = false;
};

// A value or an Error, never neither. Move-only; a failure must be looked at before it dies.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}
  Result(Status&& s) : v_(s.take_error()) {}  // only from a failed Status
  Result(Result&& o) noexcept : v_(std::move(o.v_)), checked_(o.checked_) { o.checked_ = true; }
  Result& operator=(Result&& o) noexcept {
    check_on_destroy();
    v_ = std::move(o.v_);
    checked_ = o.checked_;
    o.checked_ = true;
    return *this;
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  ~Result() { check_on_destroy(); }

  bool ok() const { checked_ = true; return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return *get(); }
  const T& value() const& { return *get(); }
  T&& value() && { return std::move(*get()); }
  T* operator->() { return get(); }
  const T* operator->() const { return get(); }
  T& operator*() & { return *get(); }
  const T& operator*() const& { return *get(); }

  const Error& error() const {
    if (v_.index() != 1) detail::die_bad_access("Result::error() on a value");
    return std::get<1>(v_);
  }
  Error take_error() {
    checked_ = true;
    if (v_.index() != 1) detail::die_bad_access("Result::take_error() on a value");
    return std::move(std::get<1>(v_));
  }
  Status status() {
    if (ok()) return Status();
    return Status(take_error());
  }

 private:
  T* get() const {
    if (v_.index() != 0) detail::die_bad_access(std::get<1>(v_).to_string().c_str());
    if (detail::kCheckErrors && !checked_) detail::die_bad_access("Result value read before ok() was checked");
    return const_cast<T*>(&std::get<0>(v_));
  }
  void check_on_destroy() const {
    if (detail::kCheckErrors && !checked_ && v_.index() == 1) detail::die_unchecked(std::get<1>(v_));
  }
  std::variant<T, Error> v_;
  mutable bool checked_ = false;
};

}  // namespace kvf
