// Error formatting and the debug-build traps for unchecked failures.
#include "core/error.h"

#include <cstdio>

namespace kvf {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidInput: return "invalid input";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kCapacity: return "capacity";
    case ErrorCode::kValidation: return "validation failed";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

std::string Error::to_string() const { return str_cat(error_code_name(code_), ": ", message_); }

namespace detail {

void die_unchecked(const Error& e) {
  std::fprintf(stderr, "kvforge: unhandled error destroyed unchecked: %s\n", e.to_string().c_str());
  std::abort();
}

void die_bad_access(const char* what) {
  std::fprintf(stderr, "kvforge: bad Result/Status access: %s\n", what);
  std::abort();
}

}  // namespace detail
}  // namespace kvf
