#include "ft/common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ft::log {
namespace {

Level level_from_env() {
  const char* v = std::getenv("FT_LOG_LEVEL");
  if (!v) return Level::kInfo;
  if (!std::strcmp(v, "error")) return Level::kError;
  if (!std::strcmp(v, "warn")) return Level::kWarn;
  if (!std::strcmp(v, "debug")) return Level::kDebug;
  return Level::kInfo;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

Level current_level() { return static_cast<Level>(level_ref().load(std::memory_order_relaxed)); }
void set_level(Level level) { level_ref().store(static_cast<int>(level)); }

void write(Level level, const std::string& message) {
  static std::mutex mu;
  static const char* kNames[] = {"E", "W", "I", "D"};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const double secs = std::chrono::duration<double>(now).count();
  std::lock_guard lock(mu);
  std::fprintf(stderr, "[%s %.3f] %s\n", kNames[static_cast<int>(level)], secs, message.c_str());
}

}  // namespace ft::log
