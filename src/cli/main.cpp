// The `kvforge` command. The only place that turns an Error into an exit code:
// 0 success, 1 a failure while running, 2 a bad command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <vector>

#include "cli/command.h"

int main(int argc, char** argv) {
  CLI::App app{"kvforge: an LLM inference engine built around attention and the KV cache"};
  bool version = false;
  app.add_flag("--version", version, "Print the version and exit");
  app.require_subcommand(0, 1);
  const std::vector<kvf::cli::Command> commands{
      kvf::cli::add_generate_command(app), kvf::cli::add_logits_command(app), kvf::cli::add_tokenize_command(app),
      kvf::cli::add_inspect_command(app), kvf::cli::add_convert_command(app), kvf::cli::add_demo_command(app),
      kvf::cli::add_compile_command(app), kvf::cli::add_bench_command(app), kvf::cli::add_batch_command(app),
      kvf::cli::add_serve_command(app),       kvf::cli::add_ahbm_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (version) {
    std::printf("kvforge %s\n", KVF_VERSION);
    return 0;
  }
  for (const kvf::cli::Command& c : commands) {
    if (!c.app->parsed()) continue;
    kvf::Status s = c.run();
    if (!s) {
      std::fprintf(stderr, "kvforge: %s\n", s.error().to_string().c_str());
      return 1;
    }
    return 0;
  }
  std::fprintf(stderr, "%s", app.help().c_str());
  return 2;
}
