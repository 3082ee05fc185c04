// A server connection's socket as an httplib::Stream whose reads must finish by a deadline, so a
// request that trickles in cannot hold a worker longer than that, however steadily it trickles.
// httplib's own stream bounds each wait for bytes (5 s), not the request: one byte every 4 s
// keeps it reading forever.
#pragma once

#include <httplib.h>

#include <chrono>
#include <vector>

namespace ft {

class DeadlineSocketStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  // `recv_timeout` bounds each wait for bytes, `send_timeout` each wait to write; neither closes
  // the socket (the caller owns it).
  DeadlineSocketStream(socket_t sock, std::chrono::milliseconds recv_timeout, std::chrono::milliseconds send_timeout);

  // A request starts: its reads must be done by `deadline`. Reads happen only while httplib takes
  // in a request, never while it writes the response, so a long streamed answer is not cut.
  void start_request(Clock::time_point deadline);
  // A read of this request waited past the deadline or the per-read timeout. From then on the
  // stream writes nothing (httplib would answer 400); the caller answers 408 and closes.
  bool timed_out() const { return timed_out_; }
  // Waits up to `timeout` for the next request's first byte: true when something can be read (a
  // byte, or the peer's close, which the read then reports). Bytes of a pipelined request that
  // are already buffered count.
  bool wait_for_request(std::chrono::milliseconds timeout) const;

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return sock_; }

 private:
  // How long the next wait for bytes may last: the per-read timeout, cut to the deadline.
  std::chrono::milliseconds read_wait() const;

  socket_t sock_;
  std::chrono::milliseconds recv_timeout_, send_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  bool timed_out_ = false;
  // httplib reads request lines a byte at a time: one recv fills this, reads are served from it.
  std::vector<char> buffer_;
  size_t buffer_begin_ = 0, buffer_end_ = 0;
};

}  // namespace ft
