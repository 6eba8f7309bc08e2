// Names and one-line rendering of Result errors.
#include "result.h"

namespace attnscope {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::io:
      return "io";
    case ErrorCode::format:
      return "format";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::too_large:
      return "too_large";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::not_found:
      return "not_found";
  }
  return "unknown";
}

std::string Error::describe() const {
  if (hint.empty()) return message;
  return message + " (hint: " + hint + ")";
}

}  // namespace attnscope
