// A small SVG line-chart writer for `locus bench plot`: lines with markers, one per series,
// linear axes from zero with 1-2-5 ticks, axis labels, a legend and a title. Standalone SVG 1.1
// that browsers and rsvg-convert render alike; it never reads files or runs programs.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace locus::loadgen {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
  int width = 900;
  int height = 560;
};

// Tick values 0, s, 2s, ... up to the first multiple of s at or above `max`, where s is a 1, 2 or
// 5 times a power of ten giving at most `max_ticks` intervals.
std::vector<double> nice_ticks(double max, int max_ticks = 6);

std::string render_svg(const LineChart& chart);

// Escapes &, <, >, " and ' for text and attribute values.
std::string xml_escape(const std::string& text);

}  // namespace locus::loadgen
