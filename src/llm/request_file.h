// Batch request files: one JSON object per line, {"id", "prompt" | "ids", "max_tokens",
// "temperature", "seed", "lora"} (docs/cli.md, `kvforge batch`). Every key is type-checked; an
// unknown key (a misspelling), a repeated id and a token id outside the vocabulary are
// refused, naming the file and line.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "llm/scheduler.h"
#include "models/lora_trace.h"
#include "models/model.h"

namespace kvf::llm {

// Reads every request of `in`; `name` is what the messages call it. Blank lines are skipped;
// no request at all is refused. A request's "lora" names an adapter of `lora`.
Result<std::vector<Request>> read_request_lines(std::istream& in, const std::string& name, const models::Model& m,
                                                const models::LoraSet* lora = nullptr);

// The same, from a file.
Result<std::vector<Request>> read_request_file(const std::string& path, const models::Model& m,
                                               const models::LoraSet* lora = nullptr);

}  // namespace kvf::llm
