// Tables of src/scenarios as gnuplot PNGs (`--png`, `kvforge ahbm sweep`). gnuplot is a
// Debian package that scripts/install-deps.sh installs; without it a plot is refused, the
// CSV is still written.
#pragma once

#include <string>
#include <vector>

#include "scenarios/scenarios.h"

namespace kvf::cli {

struct PlotSpec {
  size_t x = 0;                  // the column on the x axis
  std::vector<size_t> ys{};      // one line (or one set of boxes) per column
  bool log_x = true, log_y = true;
  bool boxes = false;            // a categorical x: clustered boxes, labels from column x
  int filter_col = -1;           // only rows whose column filter_col equals filter
  std::string filter{};
  std::string ylabel{};
};

// Writes png and, beside it, the gnuplot script that drew it (png + ".gp"). Cells "-" are
// left out of the plot.
Status plot_png(const bench::Table& t, const std::string& png, const PlotSpec& spec);

}  // namespace kvf::cli
