// Errors in each client API's own schema and HTTP status. Anthropic:
//   {"type":"error","error":{"type":"invalid_request_error","message":"..."}}
// OpenAI (Chat Completions and Responses):
//   {"error":{"message":"...","type":"invalid_request_error","param":null,"code":null}}
#pragma once

#include <optional>
#include <string>

#include "ft/common/result.h"
#include "ft/protocol/conversation.h"

namespace ft::protocol {

enum class ApiErrorKind {
  kInvalidRequest,    // 400
  kAuthentication,    // 401
  kPermission,        // 403: refused whatever the key (a forged browser request)
  kNotFound,          // 404
  kRequestTooLarge,   // 413
  kRateLimited,       // 429: queue full; retry after
  kInternal,          // 500
  kUnavailable,       // 503: engine down or restarting
  kOverloaded,        // 529 (Anthropic) / 503 (OpenAI): busy; retry after
};

struct ApiError {
  ApiErrorKind kind = ApiErrorKind::kInvalidRequest;
  std::string message;
  std::optional<int> retry_after_s;  // sent as the Retry-After header
  std::string param;                 // OpenAI: the offending field, "" when none
};

int http_status(Dialect dialect, ApiErrorKind kind);
std::string error_body(Dialect dialect, const ApiError& error);  // JSON text
// Maps a library Status onto the API error it should surface as.
ApiError api_error_from_status(const Status& status);

}  // namespace ft::protocol
