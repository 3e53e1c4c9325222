// `kvforge convert`: any checkpoint kvforge opens, written as a GGUF llama.cpp loads.
#include <cstdio>
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
  // The tokenizer is loaded when the checkpoint has one, but not required.
  models::OpenOptions opts;
  opts.tokenizer_path = o.model.tokenizer;
  Result<models::Model> m = models::open_model(o.model.model, opts);
  if (!m) return m.take_error();
  if (!m->tokenizer) std::fprintf(stderr, "kvforge: warning: %s has no tokenizer; the GGUF will have none\n", o.model.model.c_str());
  return models::export_gguf(*m, o.out);
}

}  // namespace

Command add_convert_command(CLI::App& parent) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "convert", "Write a llama checkpoint (llama2.c .bin or HF safetensors directory, with its tokenizer) as GGUF");
  add_model_options(*cmd, o->model, false);
  cmd->add_option("-o,--out", o->out, "output .gguf path")->required();
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
