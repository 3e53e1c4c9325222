// `kvforge convert`: any checkpoint kvforge opens, written as a GGUF llama.cpp loads.
#include <memory>

#include "cli/command.h"
#include "cli/model_options.h"
#include "models/export_gguf.h"

namespace kvf::cli {
namespace {

struct ConvertOptions {
  ModelOptions model;
  std::string out;
};

Status run(const ConvertOptions& o) {
  Result<models::Model> m = open(o.model, /*need_tokenizer=*/true);  // a GGUF without one is of little use
  if (!m) return m.take_error();
  return models::export_gguf(*m, o.out);
}

}  // namespace

Command add_convert_command(CLI::App& parent) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = parent.add_subcommand("convert", "Write a llama2.c checkpoint (with its tokenizer) as GGUF");
  add_model_options(*cmd, o->model, false);
  cmd->add_option("-o,--out", o->out, "output .gguf path")->required();
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
