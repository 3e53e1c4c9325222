// gnuplot scripts for bench tables (plot.h).
#include "cli/plot.h"

#include <cstdlib>
#include <fstream>

namespace kvf::cli {
namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

bool selected(const PlotSpec& spec, const std::vector<std::string>& row) {
  return spec.filter_col < 0 || row[static_cast<size_t>(spec.filter_col)] == spec.filter;
}

// Inline data blocks ('-'), one per y column; boxes number the rows and label them.
void write_data(std::ofstream& f, const bench::Table& t, const PlotSpec& spec) {
  for (size_t y : spec.ys) {
    int i = 0;
    for (const auto& r : t.rows) {
      if (!selected(spec, r)) continue;
      if (r[y] != "-") {
        if (spec.boxes) f << i << " " << r[y] << " \"" << r[spec.x] << "\"\n";  // gnuplot's data strings are double-quoted
        else f << r[spec.x] << " " << r[y] << "\n";
      }
      ++i;
    }
    f << "e\n";
  }
}

}  // namespace

Status plot_png(const bench::Table& t, const std::string& png, const PlotSpec& spec) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return unsupported("--png: gnuplot is not installed");
  const std::string script = png + ".gp";
  std::ofstream f(script);
  f << "set terminal pngcairo size 900,560\nset output " << quoted(png) << "\nset key top right box opaque\nset grid\n"
    << "set title " << quoted(t.title) << " noenhanced\nset xlabel " << quoted(t.columns[spec.x]) << " noenhanced\n";
  if (!spec.ylabel.empty()) f << "set ylabel " << quoted(spec.ylabel) << " noenhanced\n";
  if (spec.log_x && !spec.boxes) f << "set logscale x 2\n";
  if (spec.log_y) f << "set logscale y\n";
  if (spec.boxes) f << "set style fill solid 0.6 border -1\nset boxwidth 0.8 / " << spec.ys.size() << " relative\n";
  f << "plot ";
  const double width = 0.8 / static_cast<double>(spec.ys.size());
  for (size_t i = 0; i < spec.ys.size(); ++i) {
    const std::string title = quoted(t.columns[spec.ys[i]]);
    if (spec.boxes) {
      const double shift = (static_cast<double>(i) - 0.5 * static_cast<double>(spec.ys.size() - 1)) * width;
      f << (i ? ", " : "") << "'-' using ($1+" << shift << "):2" << (i ? "" : ":xtic(3)") << " with boxes title " << title
        << " noenhanced";
    } else {
      f << (i ? ", " : "") << "'-' using 1:2 with linespoints title " << title << " noenhanced";
    }
  }
  f << "\n";
  write_data(f, t, spec);
  f.close();
  if (!f) return invalid_input("--png: cannot write ", script);
  if (std::system(("gnuplot " + quoted(script)).c_str()) != 0) return internal_error("gnuplot failed on ", script);
  return {};
}

}  // namespace kvf::cli
