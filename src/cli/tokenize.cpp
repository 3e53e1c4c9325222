// `kvforge tokenize`: text to token ids with the model's tokenizer, as JSON.
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_options.h"

namespace kvf::cli {
namespace {

struct TokenizeOptions {
  ModelOptions model;
  std::string text;
  bool no_bos = false;
  bool pieces = false;
};

Status run(const TokenizeOptions& o) {
  Result<models::Model> m = open(o.model, true);
  if (!m) return m.take_error();
  const std::vector<int32_t> ids = m->tokenizer->encode(o.text, !o.no_bos);
  nlohmann::json j{{"ids", ids}};
  if (o.pieces) {
    std::vector<std::string> pieces;
    for (int32_t id : ids) pieces.push_back(m->tokenizer->vocab().pieces[static_cast<size_t>(id)]);
    j["pieces"] = pieces;
  }
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return {};
}

}  // namespace

Command add_tokenize_command(CLI::App& parent) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = parent.add_subcommand("tokenize", "Print the token ids of a text as JSON");
  add_model_options(*cmd, o->model, kWithTokenizer);
  cmd->add_option("-t,--text", o->text, "text to encode")->required();
  cmd->add_flag("--no-bos", o->no_bos, "do not add BOS");
  cmd->add_flag("--pieces", o->pieces, "also print each token's piece");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
