// Shared model options.
#include "cli/model_options.h"

#include "cli/progress.h"
#include "exec/state.h"
#include "models/tensor_parallel.h"
#include "models/synthetic.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

namespace kvf::cli {

std::string builtin_model() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share/kvforge" / kBuiltinModelFile;
    if (std::filesystem::is_regular_file(installed, ec)) return installed.string();
  }
#ifdef KVF_SOURCE_MODELS_DIR
  const std::filesystem::path source = std::filesystem::path(KVF_SOURCE_MODELS_DIR) / kBuiltinModelFile;
  if (std::filesystem::is_regular_file(source, ec)) return source.string();
#endif
  return "";
}

void add_model_options(CLI::App& cmd, ModelOptions& o, SharedOptions which) {
  std::string sizes;
  for (const std::string& s : models::synthetic_specs()) sizes += (sizes.empty() ? "" : ", ") + s;
  o.model = builtin_model();
  CLI::Option* model =
      cmd.add_option("-m,--model", o.model,
                     "a GGUF file, a llama2.c .bin (tokenizer next to it or --tokenizer), a Hugging Face directory "
                     "(config.json + *.safetensors [+ tokenizer.json]), or synthetic:<family>-<size> (seeded random "
                     "weights; sizes: " + sizes + ")" +
                         (o.model.empty() ? std::string()
                                          : str_cat(" (default: the built-in model, ", kBuiltinModelFile,
                                                    ": a 7M-parameter llama trained on the King James Bible)")));
  // Without the built-in model's file (an installed binary without its share/ folder), -m is needed.
  if (o.model.empty()) model->required();
  if (which.tokenizer) {
    cmd.add_option("--tokenizer", o.tokenizer, "llama2.c tokenizer.bin when it is not next to the model");
  }
  if (which.executor) {
    cmd.add_option("--executor", o.executor,
                   "cpu: the compiled graph on this CPU's kernels; oracle: the reference interpreter (slow, exact)")
        ->capture_default_str()
        ->check(CLI::IsMember({"cpu", "oracle"}));
    cmd.add_option("--device", o.device,
                   "where the compiled step runs: cpu, or cuda (the first GPU: weights, KV cache and every step "
                   "on the device; only token ids and logits cross)")
        ->capture_default_str()
        ->check(CLI::IsMember({"cpu", "cuda"}));
    cmd.add_option("--dtype", o.dtype,
                   "what products compute from: auto (on a GPU, 16-bit inputs where the tensor cores run them: "
                   "linears of 9+ rows over 16-bit or quantized weights, causal prefills over an f16 cache; f32 "
                   "sums), or f32 (every product from f32 inputs: what the CPU computes)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "f32"}));
  }
  if (which.tp) {
    cmd.add_option("--tp", o.tp,
                   "tensor-parallel ranks: the model split over N ranks in lockstep, each a thread "
                   "with 1/N of the attention heads, the feed-forward width and the vocabulary rows, their "
                   "partial products summed each layer; --threads is shared between them. Splits " +
                       models::tp_families() +
                       " models whose head counts and feed-forward width N divides. With --device cuda: rank r on GPU r "
                       "over NCCL where several GPUs are visible; on one GPU every rank shares it and the sums meet "
                       "on the host (a check of the split, not a speed-up)")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
  }
  if (which.cp) {
    cmd.add_option("--cp", o.cp,
                   "context-parallel GPU ranks (with --device cuda; 1: off): N ranks in lockstep, rank r on GPU r "
                   "over NCCL where N GPUs are visible (on one GPU they share it and meet on the host: a check, not a "
                   "speed-up), each holding the whole model and its 16-token blocks of the KV pool (block b on rank "
                   "b mod N) and running every step, every attention over the rank's keys of each sequence, the "
                   "partials gathered and merged (an f32 cache's on the rows kernel). batch --kv contiguous holds each "
                   "cache whole on every rank and needs --kv-type f16; not with --tp above 1")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
  }
  if (!which.runtime) return;
  cmd.add_option("--threads", o.threads, "threads the executor runs on")->capture_default_str()->check(CLI::Range(1, 256));
  cmd.add_option("--kv-type", o.kv_type,
                 "KV cache element type: f32, or f16 (half the memory and the bytes each decode step reads; "
                 "rows are rounded to f16 as they are written)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16"}));
  cmd.add_option("--ctx", o.ctx, "KV cache capacity in tokens (default: the model's context, at most 4096)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option_function<std::string>(
         "--max-memory",
         [&o](const std::string& text) {
           if (Result<int64_t> b = parse_bytes(text); b) o.max_memory = *b;  // the check below refuses the rest
         },
         "host memory kvforge may use: the weights plus the KV cache and the step buffers, e.g. 512M or 8G "
         "(default: what the host has available); more is refused before it is allocated")
      ->check([](const std::string& text) {
        Result<int64_t> b = parse_bytes(text);
        return b ? std::string() : b.error().message();
      });
}

Result<int64_t> parse_bytes(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || !(value >= 0) || text.empty()) {
    return invalid_input("expected bytes such as 512M or 8G, got \"", text, "\"");
  }
  const std::string suffix(p, end);
  double scale = 1;
  if (suffix == "K" || suffix == "KiB") scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B") return invalid_input("expected bytes such as 512M or 8G, got \"", text, "\"");
  const double bytes = value * scale;
  if (bytes >= 9.0e18) return invalid_input("\"", text, "\" is more bytes than any machine has");
  return static_cast<int64_t>(bytes);
}

Status apply_max_memory(const ModelOptions& o, const models::Model& m) {
  if (o.max_memory < 0) return {};
  int64_t weights = 0;
  for (const auto& [name, t] : m.weights.tensors()) weights += t.nbytes();
  if (weights > o.max_memory) {
    return capacity("the weights of ", o.model, " take ", weights, " bytes; --max-memory is ", o.max_memory, " bytes");
  }
  exec::limit_host_memory(o.max_memory, weights);
  return {};
}

Result<models::Model> open(const ModelOptions& o, bool need_tokenizer) {
  if (o.device == "cuda" && o.executor == "oracle") {
    return invalid_input("--executor oracle is the host's reference interpreter; it does not run with --device cuda");
  }
  models::OpenOptions opts;
  opts.tokenizer_path = o.tokenizer;
  opts.with_tokenizer = need_tokenizer;
  Progress checking("checking weights", "MiB", 1 << 20);
  opts.progress = checking.callback();
  Result<models::Model> m = models::open_model(o.model, opts);
  if (!m) return m;
  if (need_tokenizer && !m->tokenizer) {
    return invalid_input(o.model, ": no tokenizer found (pass --tokenizer, or use --ids)");
  }
  if (Status s = apply_max_memory(o, *m); !s) return s.take_error();
  return m;
}

llm::GeneratorOptions generator_options(const ModelOptions& o) {
  llm::GeneratorOptions g;
  g.executor = o.executor == "oracle" ? llm::ExecutorKind::kOracle
               : o.device == "cuda"   ? llm::ExecutorKind::kCuda
                                      : llm::ExecutorKind::kCpu;
  g.compute = o.dtype == "f32" ? llm::Compute::kF32 : llm::Compute::kAuto;
  g.threads = o.threads;
  g.kv_dtype = o.kv_type == "f16" ? DType::kF16 : DType::kF32;
  return g;
}

Result<std::unique_ptr<llm::Generator>> open_generator(const ModelOptions& o, const models::Model& m,
                                                       int64_t capacity, llm::GeneratorOptions g, int cp) {
  Result<std::unique_ptr<llm::Generator>> gen = llm::Generator::open(m, capacity, std::move(g), o.tp, cp);
  if (!gen) return gen.take_error().context(cp > 1 ? str_cat("--cp ", cp) : str_cat("--tp ", o.tp));
  return gen;
}

Status check_gpu_dense_cp(const ModelOptions& o, int cp) {
  if (cp > 1 && o.device == "cuda" && o.kv_type != "f16") {
    return invalid_input("--cp ", cp, " with --device cuda needs --kv-type f16: each rank's decode attention runs on the "
                         "split-KV decode kernel, which reads f16 caches");
  }
  return {};
}

int64_t capacity_for(const ModelOptions& o, const models::Model& m) {
  return o.ctx > 0 ? o.ctx : std::min<int64_t>(m.config.context, 4096);
}

llm::kv::WeightsIdentity identity_of(const std::string& spec) {
  std::error_code ec;
  const std::filesystem::path p(spec);
  std::string id = spec;
  if (std::filesystem::is_regular_file(p, ec)) {
    id += str_cat("|", std::filesystem::file_size(p, ec), "|",
                  std::filesystem::last_write_time(p, ec).time_since_epoch().count());
  }
  return llm::kv::weights_identity(id);
}

Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    int32_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (next < end && *next != ',')) {
      return invalid_input("--ids: expected comma-separated integers, got '", text, "'");
    }
    ids.push_back(v);
    p = next < end ? next + 1 : next;
  }
  if (ids.empty()) return invalid_input("--ids: no ids given");
  return ids;
}

// The text the generated ids add after the prompt (decoded together, for the same reason
// the stream is primed with the prompt).
std::string continuation(const load::Tokenizer& tok, const std::vector<int32_t>& prompt,
                         const std::vector<int32_t>& generated) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const std::string full = tok.decode(all), head = tok.decode(prompt);
  return full.compare(0, head.size(), head) == 0 ? full.substr(head.size()) : tok.decode(generated);
}

}  // namespace kvf::cli
