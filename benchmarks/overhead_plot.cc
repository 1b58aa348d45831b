// WriteOverheadSvg: slowdown against save_interval, one curve per capture
// configuration, log-log, as Fig. 4 of the SageMaker Debugger paper. Plain
// SVG text: no plotting dependency.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "benchmarks/overhead_bench.h"

namespace tstat::bench {
namespace {

std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", v);
  return b;
}

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else o += c;
  }
  return o;
}

}  // namespace

Status WriteOverheadSvg(const std::vector<OverheadCase>& cases, const std::string& path,
                        const std::string& subtitle) {
  std::map<std::string, std::vector<const OverheadCase*>> curves;
  double x_min = 1, x_max = 1, y_max = 1.2;
  bool first = true;
  for (const OverheadCase& c : cases) {
    if (c.config == "none") continue;
    curves[c.config].push_back(&c);
    const double x = static_cast<double>(c.save_interval);
    x_min = first ? x : std::min(x_min, x);
    x_max = first ? x : std::max(x_max, x);
    first = false;
    y_max = std::max(y_max, c.slowdown_max);
  }
  if (x_max <= x_min) x_max = x_min * 10;
  y_max = std::max(y_max * 1.1, 1.3);
  const double y_min = 0.95;

  const double W = 760, H = 500, left = 70, right = 170, top = 60, bottom = 60;
  const double pw = W - left - right, ph = H - top - bottom;
  auto X = [&](double x) {
    return left + pw * (std::log10(x) - std::log10(x_min)) / (std::log10(x_max) - std::log10(x_min));
  };
  auto Y = [&](double y) {
    return top + ph * (1 - (std::log10(y) - std::log10(y_min)) / (std::log10(y_max) - std::log10(y_min)));
  };

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << "tstat capture slowdown vs save_interval (LibTorch training, CPU)</text>\n"
    << "<text x=\"" << W / 2 << "\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">"
    << Escape(subtitle) << "</text>\n";
  // Axes, grid and ticks.
  s << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  std::vector<double> xticks;
  for (const auto& kv : curves) {
    for (const OverheadCase* c : kv.second) xticks.push_back(static_cast<double>(c->save_interval));
  }
  std::sort(xticks.begin(), xticks.end());
  xticks.erase(std::unique(xticks.begin(), xticks.end()), xticks.end());
  for (double x : xticks) {
    s << "<line x1=\"" << Num(X(x)) << "\" y1=\"" << top << "\" x2=\"" << Num(X(x)) << "\" y2=\""
      << top + ph << "\" stroke=\"#ddd\"/>\n"
      << "<text x=\"" << Num(X(x)) << "\" y=\"" << top + ph + 18 << "\" text-anchor=\"middle\">"
      << static_cast<long long>(x) << "</text>\n";
  }
  const double yticks[] = {1, 1.03, 1.1, 1.2, 1.5, 2, 3, 5, 10, 20, 50, 100};
  for (double y : yticks) {
    if (y > y_max) break;
    char label[16];
    std::snprintf(label, sizeof(label), y < 2 ? "%.2fx" : "%.0fx", y);
    s << "<line x1=\"" << left << "\" y1=\"" << Num(Y(y)) << "\" x2=\"" << left + pw << "\" y2=\""
      << Num(Y(y)) << "\" stroke=\"" << (y == 1 ? "#888" : "#ddd") << "\""
      << (y == 1 ? " stroke-dasharray=\"4 3\"" : "") << "/>\n"
      << "<text x=\"" << left - 6 << "\" y=\"" << Num(Y(y) + 4) << "\" text-anchor=\"end\">"
      << label << "</text>\n";
  }
  s << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 15
    << "\" text-anchor=\"middle\">save_interval (steps, log scale)</text>\n"
    << "<text transform=\"translate(18," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">slowdown vs no capture (log scale)</text>\n";
  // Curves, whiskers at min/max over repeats, legend.
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  int k = 0;
  for (const auto& [name, points] : curves) {
    const char* color = colors[k % 5];
    std::vector<const OverheadCase*> p = points;
    std::sort(p.begin(), p.end(),
              [](const OverheadCase* a, const OverheadCase* b) { return a->save_interval < b->save_interval; });
    s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (const OverheadCase* c : p) s << Num(X(c->save_interval)) << "," << Num(Y(std::max(c->slowdown, y_min))) << " ";
    s << "\"/>\n";
    for (const OverheadCase* c : p) {
      const double x = X(c->save_interval);
      s << "<line x1=\"" << Num(x) << "\" y1=\"" << Num(Y(std::max(c->slowdown_min, y_min))) << "\" x2=\""
        << Num(x) << "\" y2=\"" << Num(Y(c->slowdown_max)) << "\" stroke=\"" << color << "\"/>\n"
        << "<circle cx=\"" << Num(x) << "\" cy=\"" << Num(Y(std::max(c->slowdown, y_min)))
        << "\" r=\"4\" fill=\"" << color << "\"><title>" << name << " @ " << c->save_interval
        << ": " << c->slowdown << "x</title></circle>\n";
    }
    const double ly = top + 20 + 22 * k;
    s << "<line x1=\"" << left + pw + 15 << "\" y1=\"" << ly << "\" x2=\"" << left + pw + 40
      << "\" y2=\"" << ly << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n"
      << "<text x=\"" << left + pw + 46 << "\" y=\"" << ly + 4 << "\">" << Escape(name) << "</text>\n";
    ++k;
  }
  s << "</svg>\n";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::IoError("cannot write the plot " + path);
  f << s.str();
  f.close();
  if (!f) return Status::IoError("failed writing the plot " + path);
  return Status::OK();
}

}  // namespace tstat::bench
