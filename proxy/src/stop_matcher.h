// Stop strings over streamed text: text is released only once no stop string can still begin in
// it, so a stop string split across tokens is never partly shown to the client.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace ft::proxy {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
    for (const auto& s : stops_) hold_ = std::max(hold_, s.size() ? s.size() - 1 : 0);
  }

  // Appends text; returns what is safe to emit. After a match, matched() is true and the text up
  // to (not including) the stop string has been returned.
  std::string push(std::string_view text) {
    if (matched_) return "";
    buf_ += text;
    for (const auto& s : stops_) {
      if (s.empty()) continue;
      if (auto pos = buf_.find(s); pos != std::string::npos) {
        matched_ = true;
        matched_stop_ = s;
        std::string out = buf_.substr(0, pos);
        buf_.clear();
        return out;
      }
    }
    if (buf_.size() <= hold_) return "";
    std::string out = buf_.substr(0, buf_.size() - hold_);
    buf_.erase(0, buf_.size() - hold_);
    return out;
  }
  std::string flush() {
    std::string out;
    out.swap(buf_);
    return matched_ ? "" : out;
  }
  bool matched() const { return matched_; }
  const std::string& matched_stop() const { return matched_stop_; }

 private:
  std::vector<std::string> stops_;
  std::size_t hold_ = 0;
  std::string buf_;
  bool matched_ = false;
  std::string matched_stop_;
};

}  // namespace ft::proxy
