// `kvforge ahbm sweep`: the ADR-001 tuning items on the simulator (src/scenarios/ahbm_sweep.cpp),
// one CSV and one gnuplot PNG per item in --out, and the tables on stdout.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "scenarios/scenarios.h"
#include "cli/command.h"
#include "cli/plot.h"

namespace kvf::cli {
namespace {

struct SweepCli {
  bench::AhbmSweepOptions o;
  std::string out = "ahbm-sweep";
  bool no_png = false;
};

Status write_table(const bench::AhbmSweepTable& t, const SweepCli& c) {
  const std::string stem = (std::filesystem::path(c.out) / ("ahbm_" + t.name)).string();
  std::ofstream f(stem + ".csv");
  f << t.table.csv();
  f.close();
  if (!f) return invalid_input("--out: cannot write ", stem, ".csv");
  if (c.no_png) return {};
  return plot_png(t.table, stem + ".png",
                  {.x = t.x, .ys = t.ys, .log_x = t.log_x, .log_y = t.log_y, .boxes = t.boxes, .ylabel = t.ylabel});
}

Status sweep(const SweepCli& c) {
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  std::filesystem::create_directories(c.out, ec);
  if (ec) return invalid_input("--out: cannot create ", c.out, ": ", ec.message());
  Result<std::vector<bench::AhbmSweepTable>> tables = bench::ahbm_sweep_scenario(c.o);
  if (!tables) return tables.take_error();
  for (const bench::AhbmSweepTable& t : *tables) {
    std::printf("%s\n", t.table.text().c_str());
    Status s = write_table(t, c);
    if (!s) return s;
  }
  std::printf("wrote %zu tables (CSV%s) to %s in %.1f s\n", tables->size(), c.no_png ? "" : " + PNG", c.out.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return {};
}

}  // namespace

void add_ahbm_sweep_command(CLI::App& ahbm, const std::shared_ptr<std::function<Status()>>& run_fn) {
  auto c = std::make_shared<SweepCli>();
  CLI::App* s = ahbm.add_subcommand("sweep",
                                    "ADR-001 tuning items as CSV + PNG: prefetch depth, TILE, tree mapping, GQA batching, "
                                    "allocation policy, causal ring skip, reduction hidden vs exposed");
  s->add_option("--out", c->out, "directory for ahbm_<item>.csv and .png")->capture_default_str();
  s->add_option("--config", c->o.config, "hardware JSON (defaults otherwise)");
  s->add_option("--context", c->o.context, "decode-sp context of the tuning tables")->capture_default_str()->check(CLI::PositiveNumber);
  s->add_option("--n-pe", c->o.n_pe, "PEs per decode-sp reduction group")->capture_default_str()->check(CLI::Range(2, 64));
  s->add_option("--max-context", c->o.max_context, "longest context of the reduction table (128, x4, ...)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  s->add_option("--prefill-context", c->o.prefill_context, "prompt tokens of the ring and prefill rows")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  s->add_option("--seed", c->o.seed, "random Q, K, V")->capture_default_str();
  s->add_option("--only", c->o.only, "run only these tables (comma-separated: prefetch, tile, mapping, gqa, "
                                     "allocation, ring, reduction)")
      ->delimiter(',');
  s->add_flag("--no-png", c->no_png, "CSV only (no gnuplot needed)");
  s->callback([=] { *run_fn = [=] { return sweep(*c); }; });
}

}  // namespace kvf::cli
