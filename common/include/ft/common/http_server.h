// The cpp-httplib server the proxy and the engine listen with: httplib's, with bounds on what slow
// or numerous clients can hold.
//
// - A request (request line, headers, body) must arrive within `request_read_timeout_s` of its
//   first byte, else the server answers 408 and closes. httplib alone bounds each wait for bytes
//   (5 s), so a client sending a byte every few seconds held a worker forever, and as many such
//   clients as workers held the whole server. Only the request is timed: a streamed answer may
//   take as long as it takes.
// - At most `max_queued_requests` accepted connections wait for a free worker; past that, new
//   connections are answered 503 with Retry-After at once and closed (httplib's queue had no bound:
//   they waited unanswered).
// - An idle keep-alive connection holds its worker for at most 5 s, and for at most 5 requests
//   (httplib's defaults, kept).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace ft {

struct HttpLimits {
  int threads = 32;                 // connections served at once
  int max_queued_requests = 128;    // connections waiting for a worker before new ones get 503
  int request_read_timeout_s = 30;  // a request's headers and body arrive within this (0: no bound)
  std::string refusal_body = R"({"error":{"message":"server busy; retry"}})";  // JSON sent with the 503
};

class DeadlineSocketStream;

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(HttpLimits limits);

  // Connections refused with 503 because the queue was full.
  uint64_t refused_total() const { return refused_.load(); }
  // Requests answered 408 because they did not arrive in time.
  uint64_t read_timeouts_total() const { return read_timeouts_.load(); }

 private:
  // httplib's per-connection hook (a private virtual of httplib::Server): runs the keep-alive loop
  // over a DeadlineSocketStream, or refuses the connection when the queue sent it back.
  bool process_and_close_socket(socket_t sock) override;
  // Waits for the next request's first byte within the keep-alive timeout; false once the server stops.
  bool next_request_arrives(const DeadlineSocketStream& stream) const;
  void refuse(socket_t sock);

  const HttpLimits limits_;
  std::atomic<uint64_t> refused_{0}, read_timeouts_{0};
  std::chrono::steady_clock::time_point last_refusal_warning_{};  // the accept thread's alone
};

}  // namespace ft
