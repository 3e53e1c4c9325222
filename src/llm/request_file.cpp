#include "llm/request_file.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace kvf::llm {
namespace {

Result<Request> read_request(const nlohmann::json& j, int64_t no, const models::Model& m, const models::LoraSet* lora) {
  auto bad = [](const std::string& why) { return invalid_input(why); };
  if (!j.is_object()) return bad("not a JSON object");
  static const std::set<std::string> kKeys{"id", "prompt", "ids", "max_tokens", "temperature", "seed", "lora"};
  for (const auto& [key, value] : j.items()) {
    if (!kKeys.count(key)) {
      return bad(str_cat("unknown key \"", key, "\" (known: id, prompt, ids, max_tokens, temperature, seed, lora)"));
    }
  }
  Request r;
  if (!j.contains("id")) r.id = str_cat("line", no);
  else if (j["id"].is_string()) r.id = j["id"].get<std::string>();
  else if (j["id"].is_number_integer()) r.id = j["id"].dump();
  else return bad("\"id\" must be a string or an integer");
  if (j.contains("ids") == j.contains("prompt")) return bad("give exactly one of \"prompt\" and \"ids\"");
  if (j.contains("ids")) {
    if (!j["ids"].is_array()) return bad("\"ids\" must be an array of token ids");
    for (const auto& x : j["ids"]) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= m.config.vocab) {
        return bad(str_cat("\"ids\" must be an array of token ids in [0, ", m.config.vocab, ")"));
      }
      r.prompt.push_back(x.get<int32_t>());
    }
  } else {
    if (!j["prompt"].is_string()) return bad("\"prompt\" must be a string");
    if (!m.tokenizer) return bad("the model has no tokenizer: use \"ids\"");
    r.prompt = m.tokenizer->encode(j["prompt"].get<std::string>(), true);
  }
  if (r.prompt.empty()) return bad("the prompt has no tokens");
  if (j.contains("max_tokens")) {
    const auto& v = j["max_tokens"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return bad("\"max_tokens\" must be an integer >= 0");
    }
    r.max_tokens = v.get<int64_t>();
  }
  if (j.contains("temperature")) {
    const auto& v = j["temperature"];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) return bad("\"temperature\" must be a number >= 0");
    r.sampler.temperature = v.get<double>();
  }
  if (j.contains("seed")) {
    if (!j["seed"].is_number_unsigned()) return bad("\"seed\" must be an integer >= 0");
    r.sampler.seed = j["seed"].get<uint64_t>();
  }
  if (j.contains("lora") && !j["lora"].is_null()) {
    if (!j["lora"].is_string()) return bad("\"lora\" must be the name of a --lora adapter");
    Result<int32_t> id = models::lora_id(lora, j["lora"].get<std::string>());
    if (!id) return id.take_error();
    r.adapter = *id;
  }
  return r;
}

}  // namespace

Result<std::vector<Request>> read_request_lines(std::istream& in, const std::string& name, const models::Model& m,
                                                const models::LoraSet* lora) {
  std::vector<Request> out;
  std::set<std::string> ids;
  std::string line;
  for (int64_t no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Result<Request> r = read_request(nlohmann::json::parse(line, nullptr, false), no, m, lora);
    if (!r) return r.take_error().context(name, ":", no);
    if (!ids.insert(r->id).second) return invalid_input(name, ":", no, ": the id \"", r->id, "\" is used twice");
    out.push_back(std::move(*r));
  }
  if (out.empty()) return invalid_input(name, ": no requests");
  return out;
}

Result<std::vector<Request>> read_request_file(const std::string& path, const models::Model& m,
                                               const models::LoraSet* lora) {
  std::ifstream in(path);
  if (!in) return invalid_input("--requests: cannot open ", path);
  return read_request_lines(in, path, m, lora);
}

}  // namespace kvf::llm
