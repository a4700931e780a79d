#include "loadgen/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace locus::loadgen {

namespace {

// Tableau 10: distinguishable in colour and in greyscale print.
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

// Enough decimals to tell ticks `step` apart, and no more.
std::string tick_label(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double max, int max_ticks) {
  if (!(max > 0) || !std::isfinite(max)) max = 1;
  max_ticks = std::max(max_ticks, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(max / max_ticks)));
  double step = 10 * magnitude;
  for (double m : {1.0, 2.0, 5.0}) {
    if (std::ceil(max / (m * magnitude) - 1e-9) <= max_ticks) {
      step = m * magnitude;
      break;
    }
  }
  const auto intervals = static_cast<int>(std::ceil(max / step - 1e-9));
  std::vector<double> ticks;
  for (int i = 0; i <= intervals; ++i)
    ticks.push_back(i * step);
  return ticks;
}

std::string render_svg(const LineChart& c) {
  const double left = 80, right = 230, top = 50, bottom = 64;
  const double x0 = left, x1 = c.width - right, y0 = top, y1 = c.height - bottom;
  // The legend sits right of the plot; widen the canvas (not the plot) for long labels, at
  // ~7 px per character of the 12 px font.
  size_t longest = 0;
  for (const PlotSeries& ps : c.series)
    longest = std::max(longest, ps.label.size());
  const int width =
      c.width + static_cast<int>(std::max(0.0, 60 + 7.0 * static_cast<double>(longest) - right));
  double max_x = 0, max_y = 0;
  for (const PlotSeries& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(x)) max_x = std::max(max_x, x);
      if (std::isfinite(y)) max_y = std::max(max_y, y);
    }
  }
  const std::vector<double> xt = nice_ticks(max_x), yt = nice_ticks(max_y);
  const double xmax = xt.back(), ymax = yt.back();
  auto px = [&](double x) { return x0 + (x1 - x0) * x / xmax; };
  auto py = [&](double y) { return y1 - (y1 - y0) * y / ymax; };

  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
      "font-size=\"12\">\n",
      width, c.height);
  s += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += fmt::format(
      "<text class=\"title\" x=\"{:.1f}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" "
      "font-weight=\"bold\">{}</text>\n",
      (x0 + x1) / 2, xml_escape(c.title));

  s += "<g class=\"grid\" stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (double t : xt)
    s += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\"/>\n", px(t),
                     y0, y1);
  for (double t : yt)
    s += fmt::format("<line x1=\"{1:.2f}\" y1=\"{0:.2f}\" x2=\"{2:.2f}\" y2=\"{0:.2f}\"/>\n", py(t),
                     x0, x1);
  s += "</g>\n";

  s += "<g class=\"axes\" stroke=\"black\" stroke-width=\"1\">\n";
  s += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{2:.2f}\" y2=\"{1:.2f}\"/>\n", x0, y1,
                   x1);
  s += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\"/>\n", x0, y0,
                   y1);
  for (double t : xt)
    s += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\"/>\n", px(t),
                     y1, y1 + 5);
  for (double t : yt)
    s += fmt::format("<line x1=\"{1:.2f}\" y1=\"{0:.2f}\" x2=\"{2:.2f}\" y2=\"{0:.2f}\"/>\n", py(t),
                     x0 - 5, x0);
  s += "</g>\n";
  s += "<g class=\"tick-labels\" fill=\"black\">\n";
  const double x_step = xt.size() > 1 ? xt[1] : 1, y_step = yt.size() > 1 ? yt[1] : 1;
  for (double t : xt)
    s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{}</text>\n", px(t),
                     y1 + 19, tick_label(t, x_step));
  for (double t : yt)
    s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"end\">{}</text>\n", x0 - 8,
                     py(t) + 4, tick_label(t, y_step));
  s += "</g>\n";
  s += fmt::format(
      "<text class=\"x-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
      "font-size=\"13\">{}</text>\n",
      (x0 + x1) / 2, c.height - 18.0, xml_escape(c.x_label));
  s += fmt::format(
      "<text class=\"y-label\" x=\"0\" y=\"0\" transform=\"translate(20 {:.1f}) rotate(-90)\" "
      "text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
      (y0 + y1) / 2, xml_escape(c.y_label));

  for (size_t i = 0; i < c.series.size(); ++i) {
    const PlotSeries& series = c.series[i];
    const char* color = kColors[i % std::size(kColors)];
    s += fmt::format("<g class=\"series\" data-label=\"{}\">\n", xml_escape(series.label));
    std::string points;
    for (const auto& [x, y] : series.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!points.empty()) points += ' ';
      points += fmt::format("{:.2f},{:.2f}", px(x), py(y));
    }
    s += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
        "stroke-linejoin=\"round\"/>\n",
        points, color);
    for (const auto& [x, y] : series.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      s += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"4\" fill=\"{}\"/>\n", px(x), py(y),
                       color);
    }
    s += "</g>\n";
  }

  s += "<g class=\"legend\">\n";
  for (size_t i = 0; i < c.series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    const double y = y0 + 10 + 22.0 * static_cast<double>(i);
    const double x = x1 + 20;
    s += fmt::format(
        "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" "
        "stroke-width=\"2\"/>\n",
        x, y, x + 24, y, color);
    s += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"4\" fill=\"{}\"/>\n", x + 12, y,
                     color);
    s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\">{}</text>\n", x + 32, y + 4,
                     xml_escape(c.series[i].label));
  }
  s += "</g>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace locus::loadgen
