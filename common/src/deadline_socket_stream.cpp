#include "deadline_socket_stream.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace ft {
namespace {

constexpr size_t kBufferBytes = 4096;

// poll() for one socket: > 0 ready, 0 timed out, < 0 error.
int wait_for(socket_t sock, short events, std::chrono::milliseconds timeout) {
  pollfd p{sock, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, int(std::max<std::chrono::milliseconds::rep>(0, timeout.count())));
  } while (r < 0 && errno == EINTR);
  return r;
}

// What httplib reports for a peer or a local end: numeric address and port (nothing for others).
void address_of(int (*name_of)(int, sockaddr*, socklen_t*), socket_t sock, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (name_of(sock, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
  if (addr.ss_family == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  else if (addr.ss_family == AF_INET6)
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  else
    return;
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host.data(), socklen_t(host.size()), nullptr, 0,
                  NI_NUMERICHOST) == 0)
    ip = host.data();
}

}  // namespace

DeadlineSocketStream::DeadlineSocketStream(socket_t sock, std::chrono::milliseconds recv_timeout,
                                           std::chrono::milliseconds send_timeout)
    : sock_(sock), recv_timeout_(recv_timeout), send_timeout_(send_timeout), buffer_(kBufferBytes) {}

void DeadlineSocketStream::start_request(Clock::time_point deadline) {
  deadline_ = deadline;
  timed_out_ = false;
}

bool DeadlineSocketStream::wait_for_request(std::chrono::milliseconds timeout) const {
  return buffer_begin_ < buffer_end_ || wait_for(sock_, POLLIN, timeout) != 0;
}

std::chrono::milliseconds DeadlineSocketStream::read_wait() const {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
  return std::min(recv_timeout_, left);
}

bool DeadlineSocketStream::is_readable() const {
  return buffer_begin_ < buffer_end_ || wait_for(sock_, POLLIN, read_wait()) > 0;
}

ssize_t DeadlineSocketStream::read(char* ptr, size_t size) {
  if (buffer_begin_ < buffer_end_) {
    const size_t n = std::min(size, buffer_end_ - buffer_begin_);
    std::memcpy(ptr, buffer_.data() + buffer_begin_, n);
    buffer_begin_ += n;
    return ssize_t(n);
  }
  const std::chrono::milliseconds wait = read_wait();
  if (wait.count() <= 0 || wait_for(sock_, POLLIN, wait) == 0) {
    timed_out_ = true;
    return -1;
  }
  // A body's large reads go straight to the caller; small ones (line by line) through the buffer.
  const bool direct = size >= buffer_.size();
  ssize_t n;
  do {
    n = ::recv(sock_, direct ? ptr : buffer_.data(), direct ? size : buffer_.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0 || direct) return n;
  const size_t give = std::min(size, size_t(n));
  std::memcpy(ptr, buffer_.data(), give);
  buffer_begin_ = give;
  buffer_end_ = size_t(n);
  return ssize_t(give);
}

bool DeadlineSocketStream::is_writable() const {
  if (wait_for(sock_, POLLOUT, send_timeout_) <= 0) return false;
  // Writable is not alive: a peer that closed still accepts writes until the reset. A readable
  // socket whose peek finds no byte is closed (what httplib checks too, so a streamed answer stops
  // when its client goes away).
  if (wait_for(sock_, POLLIN, std::chrono::milliseconds(0)) == 0) return true;
  char byte;
  return ::recv(sock_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

ssize_t DeadlineSocketStream::write(const char* ptr, size_t size) {
  if (timed_out_ || !is_writable()) return -1;
  ssize_t n;
  do {
    n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void DeadlineSocketStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  address_of(::getpeername, sock_, ip, port);
}

void DeadlineSocketStream::get_local_ip_and_port(std::string& ip, int& port) const {
  address_of(::getsockname, sock_, ip, port);
}

}  // namespace ft
