// One subcommand of `kvforge`: its CLI11 parser and the action main() runs when it is
// chosen. Each command file adds itself to the app and keeps its options alive in the
// action's closure.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

#include "core/error.h"

namespace kvf::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<Status()> run;
};

Command add_demo_command(CLI::App& parent);
Command add_generate_command(CLI::App& parent);
Command add_logits_command(CLI::App& parent);
Command add_tokenize_command(CLI::App& parent);
Command add_inspect_command(CLI::App& parent);
Command add_convert_command(CLI::App& parent);
Command add_compile_command(CLI::App& parent);
Command add_bench_command(CLI::App& parent);
Command add_batch_command(CLI::App& parent);
Command add_serve_command(CLI::App& parent);
Command add_ahbm_command(CLI::App& parent);
// `ahbm sweep` (cli/ahbm_sweep.cpp), under the ahbm command; it sets run_fn when chosen.
void add_ahbm_sweep_command(CLI::App& ahbm, const std::shared_ptr<std::function<Status()>>& run_fn);

}  // namespace kvf::cli
