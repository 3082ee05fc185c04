// What each client has asked of this server lately, for /v1/stats and the dashboard: one row per
// tenant and agent (the product name its User-Agent starts with: claude-cli, opencode, codex_exec,
// ...), with its requests, those in flight, and the prompt tokens it sent and had restored.
// Bounded: past max_rows the least recently seen idle row is forgotten, so clients cycling through
// keys or User-Agents cannot grow it without end.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace ft::proxy {

// The product name a User-Agent starts with ("claude-cli/2.1 (external)" -> "claude-cli"), only
// [A-Za-z0-9._-] and at most 40 characters; "unknown" when there is none.
std::string agent_name(std::string_view user_agent);

class ClientActivity {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ClientActivity(std::size_t max_rows = 256) : max_rows_(max_rows) {}

  // One request from admission to its last byte: counted in flight until destroyed.
  class Request {
   public:
    Request(Request&& other) noexcept
        : ledger_(std::exchange(other.ledger_, nullptr)), key_(std::move(other.key_)) {}
    Request& operator=(Request&&) = delete;
    Request(const Request&) = delete;
    Request& operator=(const Request&) = delete;
    ~Request();

    // Once the prefix is restored: the prompt's tokens and how many of them were restored.
    void tokens(std::size_t prompt, std::size_t restored);
    void failed();

   private:
    friend class ClientActivity;
    Request(ClientActivity* ledger, std::pair<std::string, std::string> key)
        : ledger_(ledger), key_(std::move(key)) {}
    ClientActivity* ledger_;
    std::pair<std::string, std::string> key_;  // tenant, agent
  };

  Request begin(const std::string& tenant, const std::string& agent);

  // The rows, most recently seen first; only `tenant`'s when given.
  nlohmann::json to_json(const std::optional<std::string>& tenant = std::nullopt) const;

 private:
  struct Row {
    uint64_t requests = 0, errors = 0, in_flight = 0, prompt_tokens = 0, restored_tokens = 0;
    Clock::time_point last_seen;
  };
  template <typename F>
  void update(const std::pair<std::string, std::string>& key, F&& f);
  void forget_one_idle();

  std::size_t max_rows_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Row> rows_;
};

}  // namespace ft::proxy
