// Minimal leveled logging to stderr. Level from FT_LOG_LEVEL (error|warn|info|debug), default info.
#pragma once

#include <sstream>
#include <string>

namespace ft::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

Level current_level();
void set_level(Level level);
void write(Level level, const std::string& message);

}  // namespace ft::log

#define FT_LOG(level, expr)                                                    \
  do {                                                                         \
    if (static_cast<int>(level) <= static_cast<int>(::ft::log::current_level())) { \
      std::ostringstream ft_log_os_;                                           \
      ft_log_os_ << expr;                                                      \
      ::ft::log::write(level, ft_log_os_.str());                               \
    }                                                                          \
  } while (0)
#define FT_ERROR(expr) FT_LOG(::ft::log::Level::kError, expr)
#define FT_WARN(expr) FT_LOG(::ft::log::Level::kWarn, expr)
#define FT_INFO(expr) FT_LOG(::ft::log::Level::kInfo, expr)
#define FT_DEBUG(expr) FT_LOG(::ft::log::Level::kDebug, expr)
