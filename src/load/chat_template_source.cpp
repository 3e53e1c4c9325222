#include "load/chat_template_source.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "load/gguf.h"

namespace kvf::load {
namespace {

namespace fs = std::filesystem;

Result<std::string> from_tokenizer_config(const fs::path& p) {
  Result<std::string> text = read_chat_template_file(p.string());
  if (!text) return text;
  const nlohmann::json cfg = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object()) return invalid_input(p.string(), ": malformed JSON");
  auto t = cfg.find("chat_template");
  if (t == cfg.end() || t->is_null()) return std::string();
  if (t->is_string()) return t->get<std::string>();
  if (t->is_array()) {
    for (const nlohmann::json& named : *t) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") && named["template"].is_string()) {
        return named["template"].get<std::string>();
      }
    }
    return unsupported(p.string(), ": chat_template lists no template named \"default\"");
  }
  return invalid_input(p.string(), ": chat_template is ", t->type_name(), "; expected a string or a list of named templates");
}

}  // namespace

Result<std::string> read_chat_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_input(path, ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<std::string> read_chat_template(const std::string& model_path) {
  std::error_code ec;
  const fs::path path(model_path);
  if (fs::is_directory(path, ec)) {
    if (fs::is_regular_file(path / "chat_template.jinja", ec)) return read_chat_template_file((path / "chat_template.jinja").string());
    if (fs::is_regular_file(path / "tokenizer_config.json", ec)) return from_tokenizer_config(path / "tokenizer_config.json");
    return std::string();
  }
  if (path.extension() != ".gguf") return std::string();
  Result<GgufFile> f = read_gguf(model_path);
  if (!f) return f.take_error();
  if (!f->find("tokenizer.chat_template")) return std::string();
  return f->get_string("tokenizer.chat_template");
}

}  // namespace kvf::load
