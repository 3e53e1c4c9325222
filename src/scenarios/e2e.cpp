// `kvforge bench e2e`: llama-bench's pp/tg measurements for kvforge alone, on one model
// file: pp = one step over `pp` prompt tokens, tg = `tg` single-token steps, both starting
// at context depth `depth` (reached by seeking: a step's cost does not depend on the
// values in the cache, so the depth is not prefilled).
#include <memory>
#include <random>

#include "scenarios/scenarios.h"
#include "llm/generator.h"
#include "models/lora_trace.h"
#include "models/model.h"

namespace kvf::bench {

Result<E2eResult> e2e_scenario(const E2eOptions& o) {
  Result<models::Model> m = models::open_model(o.model, {.tokenizer_path = "", .check_finite = false, .with_tokenizer = false});
  if (!m) return m.take_error();
  const int64_t cap = o.depth + std::max(o.pp, o.tg);
  llm::GeneratorOptions g;
  g.threads = o.threads;
  g.last_logits = true;
  g.kv_dtype = o.kv_dtype;
  if (o.cuda) g.executor = llm::ExecutorKind::kCuda;
  g.compute = o.f32_compute ? llm::Compute::kF32 : llm::Compute::kAuto;
  g.skip_passes = o.skip_passes;
  models::LoraSet lora;
  if (!o.lora.empty()) {
    Result<models::LoraAdapter> a = models::load_lora(o.lora, *m, "bench");
    if (!a) return a.take_error().context("--lora");
    lora = models::LoraSet({std::make_shared<const models::LoraAdapter>(std::move(*a))});
    g.lora = &lora;
    g.adapter = 1;
  }
  llm::Generator gen(*m, cap, g);
  std::mt19937 rng(42);
  auto tokens = [&](int64_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(m->config.vocab));
    return ids;
  };
  // median_seconds runs each measurement once untimed, then `repeats` times.
  const int64_t total = (o.repeats + 1) * (o.pp + o.tg);
  int64_t done = 0;
  auto computed = [&](int64_t tokens) {
    if (o.progress) o.progress(done += tokens, total);
  };
  E2eResult r;
  if (o.pp > 0) {
    const std::vector<int32_t> prompt = tokens(o.pp);
    Result<double> t = median_seconds(o.repeats, [&]() -> Status {
      Status s = gen.seek(o.depth);
      if (!s) return s;
      Result<std::vector<float>> out = gen.step(prompt);
      computed(o.pp);
      return out ? Status{} : Status(out.take_error());
    });
    if (!t) return t.take_error();
    r.pp_tok_s = static_cast<double>(o.pp) / *t;
  }
  if (o.tg > 0) {
    const std::vector<int32_t> ids = tokens(o.tg);
    Result<double> t = median_seconds(o.repeats, [&]() -> Status {
      Status s = gen.seek(o.depth);
      if (!s) return s;
      for (int32_t id : ids) {
        Result<std::vector<float>> out = gen.step({id});
        if (!out) return out.take_error();
        computed(1);
      }
      return {};
    });
    if (!t) return t.take_error();
    r.tg_tok_s = static_cast<double>(o.tg) / *t;
  }
  return r;
}

}  // namespace kvf::bench
