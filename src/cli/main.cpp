// The `kvforge` command. The only place that turns an Error into an exit code:
// 0 success, 1 a failure while running, 2 a bad command line.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/demo.h"

int main(int argc, char** argv) {
  CLI::App app{"kvforge: an LLM inference engine built around attention and the KV cache"};
  bool version = false;
  app.add_flag("--version", version, "Print the version and exit");
  app.require_subcommand(0, 1);

  kvf::cli::DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "Toy llama with seeded random weights on the oracle: prefill, cached decode, timings, KV bill");
  demo_cmd->add_option("--layers", demo.layers, "transformer layers")->capture_default_str()->check(CLI::PositiveNumber);
  demo_cmd->add_option("--dim", demo.dim, "model width")->capture_default_str()->check(CLI::PositiveNumber);
  demo_cmd->add_option("--heads", demo.heads, "query heads")->capture_default_str()->check(CLI::PositiveNumber);
  demo_cmd->add_option("--kv-heads", demo.kv_heads, "key/value heads (GQA when fewer than --heads)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  demo_cmd->add_option("--capacity", demo.capacity, "KV cache capacity in tokens")->capture_default_str()->check(CLI::PositiveNumber);
  demo_cmd->add_option("--prompt-len", demo.prompt_len, "random prompt tokens to prefill")->capture_default_str()->check(CLI::PositiveNumber);
  demo_cmd->add_option("-n,--steps", demo.steps, "greedy decode steps")->capture_default_str()->check(CLI::NonNegativeNumber);
  demo_cmd->add_option("--seed", demo.seed, "seed for weights and prompt")->capture_default_str();
  demo_cmd->add_option("--threads", demo.threads, "oracle matmul threads")->capture_default_str()->check(CLI::Range(1, 256));

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
  kvf::Status s;
  if (*demo_cmd) {
    s = kvf::cli::run_demo(demo);
  } else {
    std::fprintf(stderr, "%s", app.help().c_str());
    return 2;
  }
  if (!s) {
    std::fprintf(stderr, "kvforge: %s\n", s.error().to_string().c_str());
    return 1;
  }
  return 0;
}
