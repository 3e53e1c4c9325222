// The options model-reading subcommands share (--model, --tokenizer, the runtime options) and
// the helpers that turn them into an opened Model. A command offers only the ones it uses.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "llm/generator.h"
#include "llm/kv/prefix_hash.h"
#include "models/model.h"

namespace kvf::cli {

struct ModelOptions {
  std::string model;
  std::string tokenizer;
  int threads = 2;
  int64_t ctx = 0;  // KV cache capacity; 0: min(model context, 4096)
  std::string executor = "cpu";  // cpu (compiled) or oracle
  std::string device = "cpu";    // where the compiled step runs: cpu or cuda
  std::string kv_type = "f32";   // the KV cache's element type: f32 or f16
  std::string dtype = "auto";    // what products compute from: auto or f32
  int64_t max_memory = -1;       // --max-memory in bytes; -1: what the host has available
  int tp = 1;                    // tensor-parallel ranks the model is split over (CPU threads)
  int cp = 1;                    // context-parallel GPU ranks a driver's steps run over
};

// The built-in model (models/kjv-7m.gguf, see models/README.md): what --model defaults to.
inline constexpr const char* kBuiltinModelFile = "kjv-7m.gguf";
// Its path: <prefix>/share/kvforge/ beside an installed kvforge, else the source tree's models/;
// empty when neither holds it.
std::string builtin_model();

// The generator options the flags ask for.
llm::GeneratorOptions generator_options(const ModelOptions& o);
// A generator of `g` over `m`, split over --tp ranks, or over `cp` context-parallel GPU ranks
// (llm::Generator::open); a refusal names the flag.
Result<std::unique_ptr<llm::Generator>> open_generator(const ModelOptions& o, const models::Model& m,
                                                       int64_t capacity, llm::GeneratorOptions g, int cp = 1);

// --cp N (> 1) on the GPU over a dense cache (generate, batch --kv contiguous: held whole on
// every rank, each rank's decode on the split-KV decode kernel) needs an f16 KV cache:
// refused (kInvalidInput) before anything loads otherwise. A paged pool shared out over the
// ranks runs an f32 cache's attention on the rows kernel.
Status check_gpu_dense_cp(const ModelOptions& o, int cp);

// Which shared options a command offers besides -m.
struct SharedOptions {
  bool tokenizer = false;  // --tokenizer: the command encodes or decodes text
  bool runtime = false;    // --threads, --ctx, --kv-type, --max-memory: it builds steps
  bool executor = false;   // --executor, --device: it runs them
  bool tp = false;         // --tp: it runs them over tensor-parallel ranks (a Generator's or a Driver's)
  bool cp = false;         // --cp: over context-parallel GPU ranks (a Driver's; generate has its own)
};
inline constexpr SharedOptions kModelOnly{};
inline constexpr SharedOptions kWithTokenizer{.tokenizer = true};
inline constexpr SharedOptions kRunsSteps{.tokenizer = true, .runtime = true, .executor = true};
inline constexpr SharedOptions kRunsStepsSplit{.tokenizer = true, .runtime = true, .executor = true, .tp = true};
inline constexpr SharedOptions kDrivesSteps{.tokenizer = true, .runtime = true, .executor = true, .tp = true, .cp = true};

void add_model_options(CLI::App& cmd, ModelOptions& o, SharedOptions which);
Result<models::Model> open(const ModelOptions& o, bool need_tokenizer);
// --max-memory for an opened model: refused when its weights alone exceed it, else the host
// budget that the KV caches and step arenas are checked against (what open() does; the
// commands that open a model themselves call it).
Status apply_max_memory(const ModelOptions& o, const models::Model& m);
// "512M", "8G", "1.5G", "1048576": bytes (K, M, G, T are powers of 1024).
Result<int64_t> parse_bytes(const std::string& text);
// KV capacity for a run: --ctx, else the model's context capped at 4096 (the oracle holds
// the contiguous cache whole).
int64_t capacity_for(const ModelOptions& o, const models::Model& m);
// The weights behind the K/V (the prefix cache's key): the file's path, size and
// modification time (a file replaced in place is another model), or the synthetic spec.
llm::kv::WeightsIdentity identity_of(const std::string& spec);
// "1,2,3" -> ids; refuses anything that is not a comma-separated list of integers.
Result<std::vector<int32_t>> parse_ids(const std::string& text);

// The text the generated ids add after the prompt: decoded together with it, so that the
// first generated word keeps its leading space (SentencePiece strips one at the start).
std::string continuation(const load::Tokenizer& tok, const std::vector<int32_t>& prompt,
                         const std::vector<int32_t>& generated);

}  // namespace kvf::cli
