// Entry point of the `locus` binary: parses the command line and runs one subcommand.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/logging.h"
#include "core/version.h"

int main(int argc, char** argv) {
  locus::log::init();
  CLI::App app{"locus: an inference server for Mixture-of-Experts language models"};
  app.set_version_flag("--version",
                       std::string("locus ") + locus::kVersion + " (" + locus::kGitCommit + ")");
  app.require_subcommand(1);
  std::string log_level;
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off")
      ->envname("LOCUS_LOG_LEVEL");

  locus::cli::Runner run;
  locus::cli::add_info_command(app, run);
  locus::cli::add_inspect_command(app, run);
  locus::cli::add_tokenize_command(app, run);
  locus::cli::add_generate_command(app, run);
  locus::cli::add_serve_command(app, run);
  locus::cli::add_bench_command(app, run);

  // vLLM's two-letter short flags, which CLI11 (one-letter short names) cannot declare.
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) {
    if (a == "-tp") a = "--tensor-parallel-size";
    if (a == "-dp") a = "--data-parallel-size";
    arg_ptrs.push_back(a.data());
  }
  CLI11_PARSE(app, argc, arg_ptrs.data());
  if (!log_level.empty()) {
    if (auto status = locus::log::set_level(log_level); !status.is_ok()) {
      std::fprintf(stderr, "error: %s\n", status.message().c_str());
      return 2;
    }
  }
  return run ? run() : 0;
}
