// Past the readers: a fuzzed checkpoint is opened as a model (config, weights, tracer, the
// whole-model check) and, when that succeeds, runs a two-token prefill and a decode step on
// the CPU. Every refusal must be a typed kvf::Error; anything else aborts.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "exec/state.h"
#include "fuzz_util.h"
#include "llm/generator.h"
#include "models/model.h"

namespace kvf::fuzz {

// A path of this process's own under the temp directory (libFuzzer may run jobs in parallel).
inline std::filesystem::path scratch_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("kvf_fuzz_" + std::to_string(::getpid()) + "_" + name);
}

inline void write_file(const std::filesystem::path& p, const uint8_t* data, size_t size) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// Opens `spec` and, on success, steps it: the same path `kvforge generate` takes, under a
// host budget well inside libFuzzer's RSS limit.
inline void open_and_step(const std::string& spec) {
  static const bool budget = [] {
    exec::limit_host_memory(int64_t{512} << 20, 0);
    return true;
  }();
  (void)budget;
  models::OpenOptions o;
  Result<models::Model> m = models::open_model(spec, o);
  if (!ok_or_typed(m)) return;
  const int32_t vocab = static_cast<int32_t>(m->config.vocab);
  if (vocab <= 0) die("an opened model with vocabulary " + std::to_string(vocab));
  llm::GeneratorOptions g;
  g.threads = 1;
  g.last_logits = true;
  llm::Generator gen(*m, std::min<int64_t>(8, std::max<int64_t>(m->config.context, 3)), g);
  Result<std::vector<float>> pre = gen.step({0, vocab - 1});
  if (!ok_or_typed(pre)) return;
  if (static_cast<int64_t>(pre->size()) != vocab) die("prefill logits of the wrong size");
  (void)ok_or_typed(gen.step({vocab / 2}));
}

}  // namespace kvf::fuzz
