#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace locus::log {

Status set_level(std::string_view name) {
  auto level = spdlog::level::from_str(std::string(name));
  // from_str answers `off` for names it does not know; only accept `off` when asked for it.
  if (level == spdlog::level::off && name != "off") {
    return invalid_argument("unknown log level '" + std::string(name) +
                            "' (expected trace, debug, info, warn, error, critical or off)");
  }
  spdlog::set_level(level);
  return Status::ok();
}

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("locus");
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ %v");
    spdlog::set_default_logger(logger);
    if (const char* env = std::getenv("LOCUS_LOG_LEVEL")) {
      if (auto s = set_level(env); !s.is_ok()) spdlog::warn("LOCUS_LOG_LEVEL: {}", s.message());
    }
  });
}

}  // namespace locus::log
