// `locus bench plot SWEEP.json...`: the sweeps' curves (output throughput per GPU against
// tok/s/user) on one chart, written by our own SVG writer; PNG through rsvg-convert when asked.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/bench_serve_options.h"
#include "cli/commands.h"
#include "loadgen/svg_plot.h"
#include "loadgen/sweep.h"

extern char** environ;

namespace locus::cli {
namespace {

struct PlotCliOptions {
  std::vector<std::string> inputs;
  std::string output;
  std::string png;
  std::string title = "Output throughput per GPU vs interactivity";
};

// rsvg-convert renders SVG exactly as written; gnuplot would have to redraw the chart itself.
Status svg_to_png(const std::string& svg, const std::string& png) {
  std::vector<std::string> args = {"rsvg-convert", "--format", "png", "--output", png, svg};
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "rsvg-convert", nullptr, nullptr, argv.data(), environ);
  if (rc == ENOENT) {
    return unsupported(
        "--png needs rsvg-convert, which is not on PATH: install the Debian/Ubuntu package "
        "librsvg2-bin (apt-get install librsvg2-bin; scripts/deps.sh lists it)");
  }
  if (rc != 0) return io_error(fmt::format("cannot run rsvg-convert: {}", std::strerror(rc)));
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return io_error("waiting for rsvg-convert failed");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return io_error(fmt::format("rsvg-convert {} -> {} failed (status {})", svg, png, status));
  }
  return Status::ok();
}

int run_plot_command(const PlotCliOptions& o) {
  loadgen::LineChart chart;
  chart.title = o.title;
  chart.x_label = "tok/s/user (1000 / median TPOT ms)";
  chart.y_label = "output tok/s per GPU";
  for (const std::string& input : o.inputs) {
    std::ifstream f(input);
    if (!f) return report_error(fmt::format("{}: cannot open", input));
    std::stringstream text;
    text << f.rdbuf();
    const auto doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return report_error(fmt::format("{}: not valid JSON", input));
    auto curve = loadgen::read_sweep_json(doc, input);
    if (!curve) return report_error(curve.status().message());
    loadgen::PlotSeries series;
    series.label = curve->header.label.empty() ? std::filesystem::path(input).stem().string()
                                               : curve->header.label;
    for (const loadgen::SweepPoint& p : curve->points) {
      if (p.tok_per_user) series.points.emplace_back(*p.tok_per_user, p.output_throughput_per_gpu);
    }
    if (series.points.empty()) {
      std::fprintf(stderr, "warning: %s: no point has a TPOT (every request gave one token)\n",
                   input.c_str());
    }
    chart.series.push_back(std::move(series));
  }
  std::ofstream out(o.output);
  out << loadgen::render_svg(chart);
  out.close();
  if (!out) return report_error(fmt::format("cannot write {}", o.output));
  std::fprintf(stderr, "wrote %s\n", o.output.c_str());
  if (!o.png.empty()) {
    if (Status s = svg_to_png(o.output, o.png); !s.is_ok()) return report_error(s.message());
    std::fprintf(stderr, "wrote %s\n", o.png.c_str());
  }
  return 0;
}

}  // namespace

void add_bench_plot_command(CLI::App* bench, Runner& run) {
  auto o = std::make_shared<PlotCliOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "plot", "Chart `bench sweep` results: output throughput per GPU vs tok/s/user, SVG or PNG");
  cmd->add_option("results", o->inputs, "Sweep result JSON files (one line each)")->required();
  cmd->add_option("--output", o->output, "The SVG file to write")->required();
  cmd->add_option("--png", o->png, "Also a PNG (needs rsvg-convert: package librsvg2-bin)");
  cmd->add_option("--title", o->title, "Chart title");
  cmd->callback([&run, o] { run = [o] { return run_plot_command(*o); }; });
}

}  // namespace locus::cli
