// Debian's Chromium, headless, driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
// JSON messages ended by NUL on file descriptors 3 and 4, no WebSocket, no port). For end-to-end
// tests of pages the server serves: one page, what it logs as errors, every URL it requests, the
// values of JavaScript expressions, and a screenshot.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ft::test {

// The Chromium to run: $FT_CHROMIUM when set, else /usr/bin/chromium; "" when it is not there.
std::string chromium_binary();

class HeadlessChromium {
 public:
  // Starts Chromium with its profile and log under `work_dir`, kept off the network (every host
  // but loopback resolves to nothing; no background requests). nullptr, with the reason in
  // *error, when it does not start or answer.
  static std::unique_ptr<HeadlessChromium> start(const std::filesystem::path& work_dir, std::string* error);
  ~HeadlessChromium();  // closes the browser (killed when it does not go) and reaps it
  HeadlessChromium(const HeadlessChromium&) = delete;
  HeadlessChromium& operator=(const HeadlessChromium&) = delete;

  // Opens a page at `url` with console, log and network events recorded from before the first
  // byte. False when the browser does not answer.
  bool open(const std::string& url);

  // The value of `expression` in the page (JSON: strings, numbers, booleans, null); an object with
  // "exception" when it threw.
  nlohmann::json evaluate(const std::string& expression);
  // Evaluates `expression` until it is true or `timeout` passes; events are recorded meanwhile.
  bool wait_until(const std::string& expression, std::chrono::milliseconds timeout);
  // Types `text` into the focused element, as a keyboard would.
  bool insert_text(const std::string& text);
  // The page as PNG, the whole of it (not just the viewport).
  bool screenshot(const std::filesystem::path& png);

  // console.error/assert calls, uncaught exceptions and error-level log entries (failed loads,
  // Content-Security-Policy violations), each as one line of text.
  const std::vector<std::string>& errors() const { return errors_; }
  // Every URL the page requested, in order.
  const std::vector<std::string>& requested_urls() const { return requested_urls_; }

 private:
  HeadlessChromium(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  // Sends a command (to the page when `to_page`) and returns its result, recording the events
  // that arrive before it; {"error": ...} when the browser does not answer in time.
  nlohmann::json call(const std::string& method, const nlohmann::json& params, bool to_page = true,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  bool read_message(nlohmann::json& message, std::chrono::steady_clock::time_point deadline);
  void record_event(const nlohmann::json& event);

  pid_t pid_;
  int fd_;  // our end of the socket Chromium reads as fd 3 and writes as fd 4
  int next_id_ = 0;
  std::string session_;  // the attached page's session
  std::string pending_;  // bytes read past the last whole message
  std::vector<std::string> errors_;
  std::vector<std::string> requested_urls_;
};

}  // namespace ft::test
