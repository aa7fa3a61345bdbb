// sweep_plot_svg: hand-written SVG, so the bench needs no plotting library.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "bench_client/bench_report.h"

namespace lockstep::bench {

namespace {

constexpr double kWidth = 640, kHeight = 400;
constexpr double kLeft = 70, kRight = 150, kTop = 40, kBottom = 50;  // margins around the plot area
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

// A round step for about five ticks up to `largest`.
double tick_step(double largest) {
  double raw = largest / 5, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * magnitude >= raw) return m * magnitude;
  return 10 * magnitude;
}

}  // namespace

std::string sweep_plot_svg(const SweepResult& sweep) {
  std::set<int> levels;
  std::map<std::string, std::vector<std::pair<int, double>>> lines;  // cell_mode -> (streams, tok/s)
  double largest = 0;
  for (const Cell& cell : sweep.cells) {
    double tok_s = summarize(cell).aggregate_tok_s;
    levels.insert(cell.streams);
    lines[cell_mode(cell)].emplace_back(cell.streams, tok_s);
    largest = std::max(largest, tok_s);
  }
  const double step = largest > 0 ? tick_step(largest * 1.05) : 1.0;
  const double top = step * std::ceil(std::max(largest * 1.05, step) / step);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  // Streams on a log2 axis: the usual levels (1, 2, 4, 8, ...) fall evenly.
  const double low = levels.empty() ? 0 : std::log2(*levels.begin());
  const double high = levels.empty() ? 1 : std::log2(*levels.rbegin());
  auto x_of = [&](int streams) {
    return high > low ? kLeft + (std::log2(streams) - low) / (high - low) * plot_w : kLeft + plot_w / 2;
  };
  auto y_of = [&](double tok_s) { return kTop + plot_h - tok_s / top * plot_h; };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << "Aggregate tok/s against concurrent streams</text>\n";
  for (double tick = 0; tick <= top + step / 2; tick += step) {
    double y = y_of(tick);
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kLeft + plot_w << "\" y2=\"" << y
        << "\" stroke=\"#ddd\"/>\n<text x=\"" << kLeft - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
        << number(tick) << "</text>\n";
  }
  for (int streams : levels)
    svg << "<text x=\"" << x_of(streams) << "\" y=\"" << kTop + plot_h + 18 << "\" text-anchor=\"middle\">" << streams
        << "</text>\n";
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + plot_h << "\" x2=\"" << kLeft + plot_w << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\"" << kTop + plot_h
      << "\" stroke=\"black\"/>\n"
      << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 10 << "\" text-anchor=\"middle\">streams</text>\n"
      << "<text transform=\"translate(18 " << kTop + plot_h / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
      << "aggregate tok/s</text>\n";
  size_t index = 0;
  for (const auto& [mode, points] : lines) {
    const char* colour = kColours[index % std::size(kColours)];
    svg << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\" points=\"";
    for (auto [streams, tok_s] : points) svg << x_of(streams) << "," << y_of(tok_s) << " ";
    svg << "\"/>\n";
    for (auto [streams, tok_s] : points)
      svg << "<circle cx=\"" << x_of(streams) << "\" cy=\"" << y_of(tok_s) << "\" r=\"3\" fill=\"" << colour
          << "\"><title>" << streams << " streams: " << number(tok_s) << " tok/s</title></circle>\n";
    double legend_y = kTop + 10 + 20 * double(index);
    svg << "<line x1=\"" << kWidth - kRight + 15 << "\" y1=\"" << legend_y << "\" x2=\"" << kWidth - kRight + 35
        << "\" y2=\"" << legend_y << "\" stroke=\"" << colour << "\" stroke-width=\"2\"/>\n<text x=\""
        << kWidth - kRight + 40 << "\" y=\"" << legend_y + 4 << "\">" << mode << "</text>\n";
    ++index;
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace lockstep::bench
