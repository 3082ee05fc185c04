#include "client_activity.h"

#include <algorithm>
#include <vector>

namespace ft::proxy {

std::string agent_name(std::string_view user_agent) {
  std::string name;
  for (const char c : user_agent) {
    const bool kept = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
    if (!kept || name.size() == 40) break;  // '/' (the version), a space, or anything odder ends it
    name += c;
  }
  return name.empty() ? "unknown" : name;
}

ClientActivity::Request::~Request() {
  if (ledger_) ledger_->update(key_, [](Row& r) { r.in_flight -= r.in_flight > 0; });
}

void ClientActivity::Request::tokens(std::size_t prompt, std::size_t restored) {
  ledger_->update(key_, [&](Row& r) {
    r.prompt_tokens += prompt;
    r.restored_tokens += restored;
  });
}

void ClientActivity::Request::failed() {
  ledger_->update(key_, [](Row& r) { ++r.errors; });
}

ClientActivity::Request ClientActivity::begin(const std::string& tenant, const std::string& agent) {
  std::pair<std::string, std::string> key{tenant, agent};
  {
    std::lock_guard lock(mu_);
    if (!rows_.contains(key) && rows_.size() >= max_rows_) forget_one_idle();
    Row& r = rows_[key];
    ++r.requests;
    ++r.in_flight;
    r.last_seen = Clock::now();
  }
  return Request(this, std::move(key));
}

// A row forgotten while one of its requests is in flight is simply not updated any more.
template <typename F>
void ClientActivity::update(const std::pair<std::string, std::string>& key, F&& f) {
  std::lock_guard lock(mu_);
  const auto it = rows_.find(key);
  if (it == rows_.end()) return;
  f(it->second);
  it->second.last_seen = Clock::now();
}

void ClientActivity::forget_one_idle() {
  auto oldest = rows_.end();
  for (auto it = rows_.begin(); it != rows_.end(); ++it)
    if (it->second.in_flight == 0 && (oldest == rows_.end() || it->second.last_seen < oldest->second.last_seen))
      oldest = it;
  if (oldest != rows_.end()) rows_.erase(oldest);
}

nlohmann::json ClientActivity::to_json(const std::optional<std::string>& tenant) const {
  std::vector<std::pair<std::pair<std::string, std::string>, Row>> rows;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, row] : rows_)
      if (!tenant || key.first == *tenant) rows.emplace_back(key, row);
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.last_seen > b.second.last_seen; });
  const auto now = Clock::now();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, row] : rows)
    out.push_back({{"tenant", key.first},
                   {"agent", key.second},
                   {"requests", row.requests},
                   {"errors", row.errors},
                   {"in_flight", row.in_flight},
                   {"prompt_tokens", row.prompt_tokens},
                   {"restored_tokens", row.restored_tokens},
                   {"idle_seconds", std::chrono::duration<double>(now - row.last_seen).count()}});
  return out;
}

}  // namespace ft::proxy
