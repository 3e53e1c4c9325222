// `kvforge logits`: run ids through the model once and save float32 logits as .npy.
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_options.h"
#include "llm/generator.h"
#include "load/npy.h"

namespace kvf::cli {
namespace {

struct LogitsOptions {
  ModelOptions model;
  std::string ids;
  std::string out;
  bool all = false;
  bool json = false;
};

Status run(const LogitsOptions& o) {
  Result<std::vector<int32_t>> ids = parse_ids(o.ids);
  if (!ids) return ids.take_error();
  Result<models::Model> m = open(o.model, false);
  if (!m) return m.take_error();
  const int64_t n = static_cast<int64_t>(ids->size()), vocab = m->config.vocab;
  Result<std::unique_ptr<llm::Generator>> gen =
      open_generator(o.model, *m, std::max(capacity_for(o.model, *m), n), generator_options(o.model));
  if (!gen) return gen.take_error();
  Result<std::vector<float>> logits = (*gen)->step(*ids);
  if (!logits) return logits.take_error();
  std::span<const float> rows(*logits);
  Shape shape{n, vocab};
  if (!o.all) {
    rows = rows.subspan(static_cast<size_t>((n - 1) * vocab));
    shape = {vocab};
  }
  Status s = load::write_npy_f32(o.out, shape, rows);
  if (!s) return s;
  if (o.json) {
    nlohmann::json j{{"out", o.out}, {"shape", shape}, {"ids", *ids}};
    std::printf("%s\n", j.dump().c_str());
  }
  return {};
}

}  // namespace

Command add_logits_command(CLI::App& parent) {
  auto o = std::make_shared<LogitsOptions>();
  CLI::App* cmd = parent.add_subcommand("logits", "Write the logits of token ids as a float32 .npy ([vocab], or [n, vocab] with --all)");
  add_model_options(*cmd, o->model, {.runtime = true, .executor = true, .tp = true});
  cmd->add_option("--ids", o->ids, "comma-separated token ids")->required();
  cmd->add_option("-o,--out", o->out, "output .npy path")->required();
  cmd->add_flag("--all", o->all, "every position, not just the last");
  cmd->add_flag("--json", o->json, "print a JSON summary");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
