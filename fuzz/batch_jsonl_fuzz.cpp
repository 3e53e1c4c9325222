// libFuzzer target: the input as a `kvforge batch` request file (llm::read_request_lines)
// against the built-in model (its tokenizer and vocabulary). A refusal must be a typed
// kvf::Error; every accepted request must carry an id, a prompt of ids in the vocabulary, a
// token budget >= 0 and a finite temperature >= 0, and no two the same id.
#include <cmath>
#include <set>
#include <sstream>

#include "fuzz_util.h"
#include "llm/request_file.h"

using namespace kvf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const models::Model m = [] {
    Result<models::Model> r = models::open_model("models/kjv-7m.gguf");
    if (!r) fuzz::die("run from the repository root: " + r.error().to_string());
    return std::move(*r);
  }();
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  Result<std::vector<llm::Request>> reqs = llm::read_request_lines(in, "fuzz.jsonl", m);
  if (!fuzz::ok_or_typed(reqs)) return 0;
  std::set<std::string> ids;
  for (const llm::Request& r : *reqs) {
    if (!ids.insert(r.id).second) fuzz::die("a repeated id was accepted: " + r.id);
    if (r.prompt.empty()) fuzz::die("an empty prompt was accepted");
    for (int32_t id : r.prompt) {
      if (id < 0 || id >= m.config.vocab) fuzz::die("a token id outside the vocabulary was accepted");
    }
    if (r.max_tokens < 0) fuzz::die("a negative max_tokens was accepted");
    if (!std::isfinite(r.sampler.temperature) || r.sampler.temperature < 0) fuzz::die("a bad temperature was accepted");
  }
  return 0;
}
