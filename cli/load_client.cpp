#include "load_client.h"

#include <httplib.h>

#include <charconv>
#include <chrono>
#include <optional>

namespace ft::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool retryable_status(int status) { return status == 429 || status == 503 || status == 529; }

std::string first_line(std::string s, std::size_t max = 200) {
  if (const auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

}  // namespace

Result<Endpoint> parse_endpoint(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return invalid_argument("expected http://HOST:PORT, got '" + url + "'");
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto colon = rest.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0) return invalid_argument("expected http://HOST:PORT, got '" + url + "'");
  const char* begin = rest.data() + colon + 1;
  const char* end = rest.data() + rest.size();
  auto [p, ec] = std::from_chars(begin, end, port);
  if (ec != std::errc() || p != end || port < 1 || port > 65535)
    return invalid_argument("expected http://HOST:PORT, got '" + url + "'");
  return Endpoint{rest.substr(0, colon), port};
}

Outcome send_replay(const Endpoint& server, const ReplayRequest& request, int timeout_s) {
  Outcome out;
  httplib::Client client(server.host, server.port);
  client.set_keep_alive(false);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(timeout_s, 0);

  httplib::Request req;
  req.method = "POST";
  req.path = request.path;
  req.body = request.body;
  req.set_header("Content-Type", "application/json");
  for (const auto& [name, value] : request.headers) req.set_header(name, value);

  StreamReader stream(request.dialect);
  std::string body;  // a whole response, or an error answered before any stream began
  std::optional<Clock::time_point> first_content;
  req.response_handler = [&](const httplib::Response& r) {
    out.http_status = r.status;
    if (const std::string after = r.get_header_value("Retry-After"); !after.empty()) {
      double s = 0;
      auto [p, ec] = std::from_chars(after.data(), after.data() + after.size(), s);
      if (ec == std::errc() && p == after.data() + after.size() && s >= 0) out.retry_after_s = s;
    }
    return true;
  };
  const bool as_stream = request.stream;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (as_stream && out.http_status == 200) {
      stream.feed(data, n);
      if (!first_content && stream.saw_content()) first_content = Clock::now();
    } else {
      body.append(data, n);
    }
    return true;
  };

  const auto t0 = Clock::now();
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = client.send(req, res, err);
  const auto t1 = Clock::now();
  out.latency_s = seconds_between(t0, t1);
  out.ttft_s = seconds_between(t0, first_content.value_or(t1));

  if (!sent && out.http_status == 0) {
    out.why = "no answer: " + httplib::to_string(err);
    return out;
  }
  if (out.http_status != 200) {
    out.response = read_response_body(request.dialect, body);
    out.why = "HTTP " + std::to_string(out.http_status) + ": " + first_line(out.response.error_message);
    out.kind = retryable_status(out.http_status) ? Outcome::Kind::kRetryable : Outcome::Kind::kFailed;
    return out;
  }
  out.response = as_stream ? stream.summary() : read_response_body(request.dialect, body);
  if (out.response.error) {
    // Headers said 200: the failure came as an event of the stream, in the API's error shape.
    out.why = "error event " + out.response.error_type + ": " + first_line(out.response.error_message);
    out.kind = retryable_error_type(out.response.error_type) ? Outcome::Kind::kRetryable : Outcome::Kind::kFailed;
    return out;
  }
  if (!sent || !out.response.complete) {
    out.why = sent ? "the response ended without its final event" : "cut off: " + httplib::to_string(err);
    return out;
  }
  out.kind = Outcome::Kind::kCompleted;
  return out;
}

nlohmann::json server_stats(const Endpoint& server) {
  httplib::Client c(server.host, server.port);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(60, 0);  // under load it waits for an HTTP thread like any request
  const auto r = c.Get("/v1/stats");
  nlohmann::json j = r && r->status == 200 ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  return j.is_object() ? j : nlohmann::json();
}

}  // namespace ft::cli
