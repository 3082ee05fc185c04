#include "request_guard.h"

#include <algorithm>
#include <cctype>

#include "ft/common/loopback.h"

namespace ft::proxy {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// "scheme://host[:port][/...]" -> "host[:port]".
std::string origin_authority(const std::string& origin) {
  const auto scheme = origin.find("://");
  std::string rest = scheme == std::string::npos ? origin : origin.substr(scheme + 3);
  return rest.substr(0, rest.find('/'));
}

}  // namespace

std::optional<Refusal> refuse_early(const httplib::Request& req, bool loopback_only) {
  if (loopback_only && req.has_header("Host") && !loopback_host(req.get_header_value("Host")))
    return Refusal{403, "Host '" + req.get_header_value("Host") + "' does not name this server (listening on loopback)"};
  if (req.method != "POST") return std::nullopt;
  // Browsers send Origin with cross-site requests; agents send none (or this server's own).
  if (req.has_header("Origin") && !loopback_host(origin_authority(req.get_header_value("Origin"))))
    return Refusal{403, "requests from web pages of other origins are refused (Origin '" +
                            req.get_header_value("Origin") + "')"};
  const std::string te = lower(req.get_header_value("Transfer-Encoding"));
  if (!te.empty() && te != "identity")
    return Refusal{411, "Transfer-Encoding '" + te + "' is not accepted: send the body with a Content-Length"};
  const std::string ce = lower(req.get_header_value("Content-Encoding"));
  if (!ce.empty() && ce != "identity")
    return Refusal{415, "Content-Encoding '" + ce + "' is not accepted: send the body uncompressed"};
  // A page can POST text/plain or form data without a CORS preflight; JSON it cannot.
  const std::string type = lower(req.get_header_value("Content-Type"));
  if (type.substr(0, type.find(';')) != "application/json")
    return Refusal{415, "Content-Type must be application/json (got '" + req.get_header_value("Content-Type") + "')"};
  return std::nullopt;
}

}  // namespace ft::proxy
