// The `locus` subcommands. Each registers its options on the CLI11 app and returns the exit code
// when run; they share nothing but this header.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace locus::cli {

using Runner = std::function<int()>;

// Each adds a subcommand to `app`; `run` is set to the subcommand's action when it is parsed.
void add_info_command(CLI::App& app, Runner& run);
void add_inspect_command(CLI::App& app, Runner& run);
void add_tokenize_command(CLI::App& app, Runner& run);
void add_generate_command(CLI::App& app, Runner& run);
void add_serve_command(CLI::App& app, Runner& run);
void add_bench_command(CLI::App& app, Runner& run);
// `bench serve` (bench_serve_command.cc), added under `bench` by add_bench_command.
void add_bench_serve_command(CLI::App* bench, Runner& run);
void add_bench_throughput_command(CLI::App* bench, Runner& run);
void add_bench_sweep_command(CLI::App* bench, Runner& run);
void add_bench_plot_command(CLI::App* bench, Runner& run);

}  // namespace locus::cli
