// sweep_plot_svg: hand-written SVG, so the bench needs no plotting library.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "bench_client/bench_report.h"

namespace lockstep::bench {

namespace {

constexpr double kWidth = 760, kHeight = 420;
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

// Text safe inside SVG: &, < and > escaped.
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string sweep_plot_svg(const Target& target, const SweepSettings& settings, const SweepResult& sweep) {
  struct Point {
    int streams;
    double mean, low, high;  // tok/s: the mean over reps, the slowest rep's, the fastest's
  };
  std::set<int> levels;
  std::map<std::string, std::vector<Point>> lines;  // cell_mode -> points
  double largest = 0;
  for (const Cell& cell : sweep.cells) {
    Point point{cell.streams, summarize(cell).aggregate_tok_s, 0, 0};
    bool first = true;
    for (const ConcurrentRun& run : cell.reps) {
      const double tok_s = run.wall_s > 0 ? double(run.tokens()) / run.wall_s : 0.0;
      point.low = first ? tok_s : std::min(point.low, tok_s);
      point.high = first ? tok_s : std::max(point.high, tok_s);
      first = false;
    }
    levels.insert(cell.streams);
    lines[cell_mode(cell)].push_back(point);
    largest = std::max({largest, point.mean, point.high});
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
      << "Aggregate tok/s against concurrent streams</text>\n"
      << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kTop - 4 << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#444\">"
      << escaped((target.model.empty() ? std::string("model unnamed") : target.model) + ", " +
                 std::to_string(settings.tokens) + " tokens a stream, " + std::to_string(settings.reps) +
                 (settings.reps == 1 ? " rep" : " reps (bars: slowest to fastest)") + ", on " +
                 (target.device.empty() ? std::string("an unnamed device") : target.device))
      << "</text>\n";
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
    for (const Point& point : points) svg << x_of(point.streams) << "," << y_of(point.mean) << " ";
    svg << "\"/>\n";
    for (const Point& point : points) {
      const double x = x_of(point.streams);
      if (point.high > point.low)
        svg << "<line x1=\"" << x << "\" y1=\"" << y_of(point.low) << "\" x2=\"" << x << "\" y2=\"" << y_of(point.high)
            << "\" stroke=\"" << colour << "\" stroke-width=\"1\"/>\n";
      svg << "<circle cx=\"" << x << "\" cy=\"" << y_of(point.mean) << "\" r=\"3\" fill=\"" << colour << "\"><title>"
          << point.streams << " streams: " << number(point.mean) << " tok/s (reps " << number(point.low) << " to "
          << number(point.high) << ")</title></circle>\n";
    }
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
