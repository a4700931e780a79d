// `locus info`: the build and the devices this process sees.
#include <fmt/format.h>

#include "backend/device.h"
#include "cli/commands.h"
#include "core/version.h"

namespace locus::cli {

void add_info_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("info", "Print the build configuration and the visible devices");
  cmd->callback([&run] {
    run = [] {
      fmt::print("locus {} (commit {})\n", kVersion, kGitCommit);
      fmt::print("devices: {}\n", describe(query_devices()));
      return 0;
    };
  });
}

}  // namespace locus::cli
