// Logging for every module: spdlog underneath, one process-wide logger writing to stderr.
// Hot paths must not format strings per token; log per step or per request at most.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "core/status.h"

namespace locus::log {

using spdlog::critical;
using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::trace;
using spdlog::warn;

// Sets the level from a name (trace, debug, info, warn, error, critical, off). The initial level
// comes from the LOCUS_LOG_LEVEL environment variable, else info.
Status set_level(std::string_view name);

// Installs the stderr logger and applies LOCUS_LOG_LEVEL. Safe to call more than once.
void init();

}  // namespace locus::log
