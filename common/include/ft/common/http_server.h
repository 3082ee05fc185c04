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
// - Up to SOMAXCONN connections wait in the kernel to be accepted (httplib asks for 5: a burst
//   beyond that waited for the clients' SYN retransmission, 1 s and more, before being seen).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "ft/common/result.h"

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

  // Binds to host:port (0: any free port), runs the accept loop on `thread` and returns the bound
  // port once the loop is running: httplib's stop() is a no-op before that, so a stop() right
  // after a start() would otherwise leave it serving (httplib 0.11 has no wait_until_ready()).
  // kUnavailable when the address cannot be bound.
  Result<int> listen_in_background(const std::string& host, int port, std::thread& thread);

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
