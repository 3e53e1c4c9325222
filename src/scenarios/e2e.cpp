// `kvforge bench e2e`: llama-bench's pp/tg measurements for kvforge alone, on one model
// file: pp = one step over `pp` prompt tokens, tg = `tg` single-token steps, both starting
// at context depth `depth` (reached by seeking: a step's cost does not depend on the
// values in the cache, so the depth is not prefilled).
#include <functional>
#include <memory>
#include <random>
#include <tuple>

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
  std::unique_ptr<llm::Generator> base;  // with an adapter: the model without it, side by side
  if (!o.lora.empty()) {
    Result<models::LoraAdapter> a = models::load_lora(o.lora, *m, "bench");
    if (!a) return a.take_error().context("--lora");
    base = std::make_unique<llm::Generator>(*m, cap, g);
    lora = models::LoraSet({std::make_shared<const models::LoraAdapter>(std::move(*a))});
    g.lora = &lora;
    g.adapter = 1;
  }
  Result<std::unique_ptr<llm::Generator>> opened = llm::Generator::open(*m, cap, g, o.tp, o.cp);
  if (!opened) return opened.take_error().context(o.cp > 1 ? str_cat("--cp ", o.cp) : str_cat("--tp ", o.tp));
  llm::Generator& gen = **opened;
  std::mt19937 rng(42);
  auto tokens = [&](int64_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(m->config.vocab));
    return ids;
  };
  // Each measurement runs once untimed, then `repeats` times (in turn with the base's).
  const int64_t total = (o.repeats + 1) * (o.pp + o.tg) * (base ? 2 : 1);
  int64_t done = 0;
  auto computed = [&](int64_t tokens) {
    if (o.progress) o.progress(done += tokens, total);
  };
  // The medians of `run` on gen (and on base), as tokens per second.
  auto rates = [&](int64_t n, const std::function<Status(llm::Generator&)>& run) -> Result<std::pair<double, double>> {
    if (!base) {
      Result<double> t = median_seconds(o.repeats, [&] { return run(gen); });
      if (!t) return t.take_error();
      return std::pair{static_cast<double>(n) / *t, 0.0};
    }
    Result<std::pair<double, double>> t = paired_median_seconds(o.repeats, [&] { return run(gen); }, [&] { return run(*base); });
    if (!t) return t.take_error();
    return std::pair{static_cast<double>(n) / t->first, static_cast<double>(n) / t->second};
  };
  E2eResult r;
  if (o.pp > 0) {
    const std::vector<int32_t> prompt = tokens(o.pp);
    Result<std::pair<double, double>> t = rates(o.pp, [&](llm::Generator& on) -> Status {
      Status s = on.seek(o.depth);
      if (!s) return s;
      Result<std::vector<float>> out = on.step(prompt);
      computed(o.pp);
      return out ? Status{} : Status(out.take_error());
    });
    if (!t) return t.take_error();
    std::tie(r.pp_tok_s, r.base_pp_tok_s) = *t;
  }
  if (o.tg > 0) {
    const std::vector<int32_t> ids = tokens(o.tg);
    Result<std::pair<double, double>> t = rates(o.tg, [&](llm::Generator& on) -> Status {
      Status s = on.seek(o.depth);
      if (!s) return s;
      for (int32_t id : ids) {
        Result<std::vector<float>> out = on.step({id});
        if (!out) return out.take_error();
        computed(1);
      }
      return {};
    });
    if (!t) return t.take_error();
    std::tie(r.tg_tok_s, r.base_tg_tok_s) = *t;
  }
  return r;
}

}  // namespace kvf::bench
