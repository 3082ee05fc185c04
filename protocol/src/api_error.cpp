#include "ft/protocol/api_error.h"

#include <nlohmann/json.hpp>

namespace ft::protocol {
namespace {

const char* anthropic_type(ApiErrorKind kind) {
  switch (kind) {
    case ApiErrorKind::kInvalidRequest: return "invalid_request_error";
    case ApiErrorKind::kAuthentication: return "authentication_error";
    case ApiErrorKind::kPermission: return "permission_error";
    case ApiErrorKind::kNotFound: return "not_found_error";
    case ApiErrorKind::kRequestTooLarge: return "request_too_large";
    case ApiErrorKind::kRateLimited: return "rate_limit_error";
    case ApiErrorKind::kInternal: return "api_error";
    case ApiErrorKind::kUnavailable: return "api_error";
    case ApiErrorKind::kOverloaded: return "overloaded_error";
  }
  return "api_error";
}

const char* openai_type(ApiErrorKind kind) {
  switch (kind) {
    case ApiErrorKind::kInvalidRequest:
    case ApiErrorKind::kNotFound:
    case ApiErrorKind::kRequestTooLarge: return "invalid_request_error";
    case ApiErrorKind::kAuthentication: return "authentication_error";
    case ApiErrorKind::kPermission: return "permission_error";
    case ApiErrorKind::kRateLimited:
    case ApiErrorKind::kOverloaded: return "rate_limit_exceeded";
    case ApiErrorKind::kInternal:
    case ApiErrorKind::kUnavailable: return "server_error";
  }
  return "server_error";
}

}  // namespace

int http_status(Dialect dialect, ApiErrorKind kind) {
  switch (kind) {
    case ApiErrorKind::kInvalidRequest: return 400;
    case ApiErrorKind::kAuthentication: return 401;
    case ApiErrorKind::kPermission: return 403;
    case ApiErrorKind::kNotFound: return 404;
    case ApiErrorKind::kRequestTooLarge: return 413;
    case ApiErrorKind::kRateLimited: return 429;
    case ApiErrorKind::kInternal: return 500;
    case ApiErrorKind::kUnavailable: return 503;
    // Anthropic clients know 529 as "overloaded, retry"; OpenAI clients expect 503.
    case ApiErrorKind::kOverloaded: return dialect == Dialect::kAnthropic ? 529 : 503;
  }
  return 500;
}

std::string error_body(Dialect dialect, const ApiError& error) {
  nlohmann::json body;
  if (dialect == Dialect::kAnthropic) {
    body = {{"type", "error"}, {"error", {{"type", anthropic_type(error.kind)}, {"message", error.message}}}};
  } else {
    body = {{"error",
             {{"message", error.message},
              {"type", openai_type(error.kind)},
              {"param", error.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param)},
              {"code", nullptr}}}};
  }
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError api_error_from_status(const Status& status) {
  ApiError e;
  e.message = status.message();
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported: e.kind = ApiErrorKind::kInvalidRequest; break;
    case ErrorCode::kNotFound: e.kind = ApiErrorKind::kNotFound; break;
    case ErrorCode::kUnavailable: e.kind = ApiErrorKind::kUnavailable; break;
    default: e.kind = ApiErrorKind::kInternal; break;
  }
  return e;
}

}  // namespace ft::protocol
