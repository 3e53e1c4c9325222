// ApiError: what an OpenAI-compatible endpoint answers when it cannot serve a request:
// an HTTP status and the body {"error": {"message", "type", "param", "code"}}. Parsing
// returns ApiResult<T>, the value or the error, so every refusal names its parameter.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

namespace kvf::serve {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // "" is sent as null
  std::string code;   // "" is sent as null
};

template <class T>
using ApiResult = std::variant<T, ApiError>;

inline ApiError bad_param(std::string param, std::string message) {
  return {400, "invalid_request_error", std::move(message), std::move(param), ""};
}

inline nlohmann::json error_body(const ApiError& e) {
  const auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"error", {{"message", e.message}, {"type", e.type}, {"param", or_null(e.param)}, {"code", or_null(e.code)}}}};
}

}  // namespace kvf::serve
