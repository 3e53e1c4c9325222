// `kvforge convert`: any checkpoint kvforge opens, written as a GGUF llama.cpp loads, with
// the matrices kept as stored or cast to --outtype, and optionally another GGUF's tokenizer.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/progress.h"
#include "load/gguf.h"
#include "load/vocab_readers.h"
#include "models/export_gguf.h"

namespace kvf::cli {
namespace {

struct ConvertOptions {
  ModelOptions model;
  std::string out;
  std::string outtype;  // "" keeps the stored types
  std::string vocab;    // a GGUF whose tokenizer.ggml.* replaces the checkpoint's tokenizer
};

// The tokenizer of a (vocab-only) GGUF such as llama.cpp's ggml-vocab-llama-spm.gguf; its
// size must match the model's embedding rows, or ids past either end would be meaningless.
Result<std::unique_ptr<load::Tokenizer>> read_vocab(const std::string& path, int64_t model_vocab) {
  Result<load::GgufFile> f = load::read_gguf(path);
  if (!f) return f.take_error();
  Result<load::Vocab> v = load::vocab_from_gguf(*f);
  if (!v) return v.take_error();
  if (v->size() != model_vocab) {
    return invalid_input("--vocab ", path, ": ", v->size(), " tokens, but the model has a vocabulary of ", model_vocab);
  }
  Result<std::unique_ptr<load::Tokenizer>> t = load::Tokenizer::create(std::move(*v));
  if (!t) return t.take_error().context("--vocab ", path);
  return t;
}

Result<models::ExportOptions> export_options(const ConvertOptions& o) {
  models::ExportOptions e;
  if (o.outtype.empty()) return e;
  e.q4_k_m = o.outtype == "q4_k_m";
  Result<DType> dt = parse_dtype(e.q4_k_m ? "q4_k" : o.outtype);  // CLI11 already limited the names
  if (!dt) return dt.take_error().context("--outtype");
  e.outtype = *dt;
  return e;
}

Status run(const ConvertOptions& o) {
  Result<models::ExportOptions> e = export_options(o);
  if (!e) return e.take_error();
  // The checkpoint's own tokenizer is loaded when it has one (and --vocab is not given),
  // but not required.
  models::OpenOptions opts;
  opts.tokenizer_path = o.model.tokenizer;
  opts.with_tokenizer = o.vocab.empty();
  Result<models::Model> m = [&] {
    Progress checking("checking weights", "MiB", 1 << 20);
    opts.progress = checking.callback();
    return models::open_model(o.model.model, opts);
  }();
  if (!m) return m.take_error();
  if (!o.vocab.empty()) {
    Result<std::unique_ptr<load::Tokenizer>> t = read_vocab(o.vocab, m->config.vocab);
    if (!t) return t.take_error();
    m->tokenizer = std::move(*t);
  }
  if (Status can = models::can_export_gguf(m->config); !can) return can;  // before any warning
  if (!m->tokenizer) std::fprintf(stderr, "kvforge: warning: %s has no tokenizer; the GGUF will have none\n", o.model.model.c_str());
  Progress converting("converting", "MiB", 1 << 20);
  e->progress = converting.callback();
  return models::export_gguf(*m, o.out, *e);
}

}  // namespace

Command add_convert_command(CLI::App& parent) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "convert", "Write a checkpoint (llama2.c .bin, HF safetensors directory, GGUF or synthetic:...) as GGUF of its family's llama.cpp architecture");
  add_model_options(*cmd, o->model, kWithTokenizer);
  cmd->add_option("-o,--out", o->out, "output .gguf path")->required();
  cmd->add_option("--outtype", o->outtype,
                  "f32, f16, q8_0, q4_k, q6_k or q4_k_m: the type of the matrices (1-D tensors stay f32; rows that "
                  "are not whole blocks fall back to q8_0, then f16); q4_k_m is llama.cpp's Q4_K_M mix (q4_k, with "
                  "output.weight and some layers' attn_v and ffn_down in q6_k); default: keep each tensor's stored type")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_k", "q6_k", "q4_k_m"}));
  cmd->add_option("--vocab", o->vocab,
                  "a GGUF (e.g. llama.cpp's vocab-only ggml-vocab-llama-spm.gguf) whose tokenizer the output carries "
                  "instead of the checkpoint's; its size must equal the model's vocabulary");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
