// `kvforge bench SCENARIO`: the scenarios of src/scenarios/ as a table on stdout, with
// --csv and --png (gnuplot, when installed) beside it. docs/benchmarks.md records the
// numbers with the commands that made them.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/plot.h"
#include "cli/progress.h"
#include "scenarios/scenarios.h"

namespace kvf::cli {
namespace {

struct Output {
  std::string csv, png;
};

void add_output_options(CLI::App& cmd, Output& o) {
  cmd.add_option("--csv", o.csv, "also write the table as CSV to this file");
  cmd.add_option("--png", o.png, "also plot it to this PNG (needs gnuplot)");
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

Status emit(const bench::Table& t, const Output& o) {
  std::printf("%s", t.text().c_str());
  if (!o.csv.empty()) {
    std::ofstream f(o.csv);
    f << t.csv();
    if (!f) return invalid_input("--csv: cannot write ", o.csv);
  }
  return {};
}

// "512,1024" -> sizes; anything but positive integers up to 2^20 (a million keys) is refused, naming the flag.
Result<std::vector<int64_t>> parse_list(const std::string& flag, const std::string& s) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, comma - at);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 1 || v > (int64_t{1} << 20)) {
      return invalid_input(flag, ": expected comma-separated positive integers (at most 1048576), got '", s, "'");
    }
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// llama-bench's JSON for the same file and settings: the peer of `e2e`.
Result<bench::E2eResult> run_peer(const std::string& peer, const bench::E2eOptions& o) {
  const std::string kv(dtype_name(o.kv_dtype));
  const std::string cmd = str_cat(quoted(peer), " -m ", quoted(o.model), " -t ", o.threads, " -p ", o.pp, " -n ",
                                  o.tg, " -r ", o.repeats, o.depth > 0 ? str_cat(" -d ", o.depth) : "", " -ctk ", kv,
                                  " -ctv ", kv, " -o json 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return invalid_input("--peer: cannot run ", peer);
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  if (pclose(p) != 0) return invalid_input("--peer: ", cmd, " failed");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return invalid_input("--peer: ", peer, " did not print a JSON array");
  bench::E2eResult r;
  for (const auto& e : j) {
    // The median of its per-repeat samples, as for ours (llama-bench's avg_ts is a mean).
    std::vector<double> samples;
    if (e.contains("samples_ts") && e["samples_ts"].is_array()) {
      for (const auto& x : e["samples_ts"]) samples.push_back(x.get<double>());
    }
    std::sort(samples.begin(), samples.end());
    const size_t n = samples.size();
    const double ts = n == 0 ? e.value("avg_ts", 0.0) : n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    if (e.value("n_prompt", 0) > 0) r.pp_tok_s = ts;
    if (e.value("n_gen", 0) > 0) r.tg_tok_s = ts;
  }
  return r;
}

// Runs a scenario with a progress line on a terminal, cleared before its results print.
template <class Options, class Scenario>
auto with_progress(const char* unit, Options o, Scenario scenario) {
  Progress measuring("measuring", unit);
  o.progress = measuring.callback();
  return scenario(o);
}

struct E2eCli {
  bench::E2eOptions o;
  std::string kv_type = "f16";
  std::string device = "cpu";
  std::string dtype = "auto";
  bool json = false;
  std::string peer;
};

Status run_e2e(const E2eCli& c) {
  Result<bench::E2eResult> ours = with_progress("tokens", c.o, bench::e2e_scenario);
  if (!ours) return ours.take_error();
  nlohmann::json j{{"model", c.o.model}, {"threads", c.o.threads}, {"pp", c.o.pp}, {"tg", c.o.tg},
                   {"depth", c.o.depth}, {"kv_type", dtype_name(c.o.kv_dtype)}, {"pp_tok_s", ours->pp_tok_s}, {"tg_tok_s", ours->tg_tok_s}};
  if (c.o.tp > 1) j["tp"] = c.o.tp;
  if (c.o.cp > 1) j["cp"] = c.o.cp;
  if (!c.peer.empty()) {
    Result<bench::E2eResult> peer = run_peer(c.peer, c.o);
    if (!peer) return peer.take_error();
    j["peer"] = {{"pp_tok_s", peer->pp_tok_s}, {"tg_tok_s", peer->tg_tok_s}};
    if (peer->pp_tok_s > 0) j["pp_ratio"] = ours->pp_tok_s / peer->pp_tok_s;
    if (peer->tg_tok_s > 0) j["tg_ratio"] = ours->tg_tok_s / peer->tg_tok_s;
  }
  if (!c.o.lora.empty()) {
    j["without_lora"] = {{"pp_tok_s", ours->base_pp_tok_s}, {"tg_tok_s", ours->base_tg_tok_s}};
    if (ours->base_pp_tok_s > 0) j["lora_pp_ratio"] = ours->pp_tok_s / ours->base_pp_tok_s;
    if (ours->base_tg_tok_s > 0) j["lora_tg_ratio"] = ours->tg_tok_s / ours->base_tg_tok_s;
  }
  if (c.json) {
    std::printf("%s\n", j.dump().c_str());
    return {};
  }
  auto rates = [&](double pp, double tg) {
    std::string s;
    if (c.o.pp > 0) s += str_cat(" pp", c.o.pp, " ", fixed(pp, 1), " tok/s");
    if (c.o.tg > 0) s += str_cat(s.empty() ? "" : ",", " tg", c.o.tg, " ", fixed(tg, 1), " tok/s");
    return s;
  };
  // On the GPU the host threads do not run the steps: say where they ran instead.
  const std::string where = c.o.cuda ? std::string("cuda") : str_cat(c.o.threads, " threads");
  std::printf("%s, %s, depth %lld, KV %s:%s\n", c.o.model.c_str(), where.c_str(), (long long)c.o.depth,
              std::string(dtype_name(c.o.kv_dtype)).c_str(), rates(ours->pp_tok_s, ours->tg_tok_s).c_str());
  if (j.contains("without_lora")) {
    std::string ratio;
    if (c.o.pp > 0) ratio += str_cat(" pp ", fixed(j.value("lora_pp_ratio", 0.0), 2), "x");
    if (c.o.tg > 0) ratio += str_cat(ratio.empty() ? "" : ",", " tg ", fixed(j.value("lora_tg_ratio", 0.0), 2), "x");
    std::printf("without the adapter, in turn:%s; with/without:%s\n", rates(ours->base_pp_tok_s, ours->base_tg_tok_s).c_str(),
                ratio.c_str());
  }
  if (j.contains("peer")) {
    const double pp = j["peer"]["pp_tok_s"].get<double>(), tg = j["peer"]["tg_tok_s"].get<double>();
    std::string ratio;
    if (c.o.pp > 0) ratio += str_cat(" pp ", fixed(j.value("pp_ratio", 0.0), 2), "x");
    if (c.o.tg > 0) ratio += str_cat(ratio.empty() ? "" : ",", " tg ", fixed(j.value("tg_ratio", 0.0), 2), "x");
    std::printf("llama.cpp (%s):%s; kvforge/llama.cpp:%s\n", c.peer.c_str(), rates(pp, tg).c_str(), ratio.c_str());
  }
  return {};
}

// Each subcommand adds its options; its callback leaves the scenario to run in *run_fn.
using RunSlot = std::shared_ptr<std::function<Status()>>;

// bench attention: fused vs decomposed attention, or dense vs selected MLA decode (--selected).
void add_attention_bench(CLI::App& cmd, const RunSlot& run_fn) {
  auto att = std::make_shared<std::pair<bench::AttentionBenchOptions, Output>>();
  auto sel = std::make_shared<bench::SelectedBenchOptions>();
  auto selected = std::make_shared<bool>(false);
  auto contexts = std::make_shared<std::string>();
  CLI::App* a = cmd.add_subcommand("attention", "Fused attention vs the primitive decomposition, decode and prefill; "
                                                 "with --selected, dense vs selected (sparse) MLA decode attention");
  a->add_option("--threads", att->first.threads, "threads")->capture_default_str()->check(CLI::Range(1, 256));
  a->add_option("--repeats", att->first.repeats, "timed repeats per case (median)")->capture_default_str();
  a->add_option("--contexts", *contexts,
                "comma-separated key counts (default 512..32768; with --selected 8192..131072)");
  a->add_option("--max-prefill", att->first.max_prefill, "prefill cases up to this context")->capture_default_str();
  a->add_flag("--selected", *selected,
              "one decode step of a DeepSeek-V3.2-shaped layer: dense MLA attention against the sparse-attention "
              "indexer, block top-k and selected attention (f16 caches)");
  a->add_option("--topk", sel->topk, "with --selected: the keys each query keeps")->capture_default_str()->check(
      CLI::PositiveNumber);
  add_output_options(*a, att->second);
  a->callback([=] {
    *run_fn = [=]() -> Status {
      if (!contexts->empty()) {
        Result<std::vector<int64_t>> list = parse_list("--contexts", *contexts);
        if (!list) return list.take_error();
        att->first.contexts = std::move(*list);
        sel->contexts = att->first.contexts;
      }
      if (*selected) {
        sel->threads = att->first.threads;
        sel->repeats = att->first.repeats;
        Result<bench::Table> t = with_progress("contexts", *sel, bench::selected_attention_scenario);
        if (!t) return t.take_error();
        Status s = emit(*t, att->second);
        if (!s || att->second.png.empty()) return s;
        return plot_png(*t, att->second.png, {.ys = {1, 2}, .ylabel = "ms"});
      }
      Result<bench::Table> t = with_progress("contexts", att->first, bench::attention_scenario);
      if (!t) return t.take_error();
      Status s = emit(*t, att->second);
      if (!s || att->second.png.empty()) return s;
      return plot_png(*t, att->second.png, {.x = 1, .ys = {2, 3}, .filter_col = 0, .filter = "decode"});
    };
  });
}

// bench decode-curve: per-token latency, naive vs cached vs cached+fused.
void add_decode_curve_bench(CLI::App& cmd, const RunSlot& run_fn) {
  auto dc = std::make_shared<std::pair<bench::DecodeCurveOptions, Output>>();
  auto dc_contexts = std::make_shared<std::string>();
  CLI::App* d = cmd.add_subcommand("decode-curve", "Per-token latency: naive vs cached vs cached+fused (seed 003)");
  d->add_option("-m,--model", dc->first.model, "model (any --model form)")->capture_default_str();
  d->add_option("--threads", dc->first.threads, "threads")->capture_default_str()->check(CLI::Range(1, 256));
  d->add_option("--repeats", dc->first.repeats, "timed repeats per case (median)")->capture_default_str();
  d->add_option("--contexts", *dc_contexts, "comma-separated contexts (default 512,1024,2048,4096)");
  auto dc_kv = std::make_shared<std::string>("f32");
  d->add_option("--kv-type", *dc_kv, "KV cache element type of the cached runs")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16"}));
  add_output_options(*d, dc->second);
  d->callback([=] {
    *run_fn = [=]() -> Status {
      if (!dc_contexts->empty()) {
        Result<std::vector<int64_t>> list = parse_list("--contexts", *dc_contexts);
        if (!list) return list.take_error();
        dc->first.contexts = std::move(*list);
      }
      dc->first.kv_dtype = *dc_kv == "f16" ? DType::kF16 : DType::kF32;
      Result<bench::Table> t = with_progress("contexts", dc->first, bench::decode_curve_scenario);
      if (!t) return t.take_error();
      Status s = emit(*t, dc->second);
      if (!s || dc->second.png.empty()) return s;
      return plot_png(*t, dc->second.png, {.ys = {1, 2, 3}});
    };
  });
}

// bench memory: the KV bill against what the paged pool holds.
void add_memory_bench(CLI::App& cmd, const RunSlot& run_fn) {
  auto mem = std::make_shared<std::pair<bench::MemoryBenchOptions, Output>>();
  auto mem_kv = std::make_shared<std::string>("f32");
  CLI::App* mc = cmd.add_subcommand("memory", "KV memory bill vs what the paged pool holds (seed 003)");
  mc->add_option("-m,--model", mem->first.model, "model (any --model form)")->capture_default_str();
  mc->add_option("--threads", mem->first.threads, "threads")->capture_default_str()->check(CLI::Range(1, 256));
  mc->add_option("--requests", mem->first.requests, "requests of random lengths")->capture_default_str()->check(CLI::Range(1, 4096));
  mc->add_option("--max-prompt", mem->first.max_prompt, "longest prompt")->capture_default_str()->check(CLI::PositiveNumber);
  mc->add_option("--max-tokens", mem->first.max_tokens, "most new tokens per request")->capture_default_str()->check(CLI::PositiveNumber);
  mc->add_option("--max-rows", mem->first.max_rows, "sequences per step (the pool holds this many of the longest)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  mc->add_option("--kv-type", *mem_kv, "KV cache element type")->capture_default_str()->check(CLI::IsMember({"f32", "f16"}));
  mc->add_option("--seed", mem->first.seed, "request lengths and ids")->capture_default_str();
  mc->add_option("--window", mem->first.window, "StreamingLLM: every layer sees the last W positions (and the sinks)")
      ->check(CLI::PositiveNumber);
  mc->add_option("--sinks", mem->first.sinks, "StreamingLLM: and the first S positions (needs --window)")
      ->check(CLI::NonNegativeNumber);
  add_output_options(*mc, mem->second);
  mc->callback([=] {
    *run_fn = [=]() -> Status {
      if (mem->first.sinks > 0 && mem->first.window == 0) return invalid_input("--sinks needs --window");
      mem->first.kv_dtype = *mem_kv == "f16" ? DType::kF16 : DType::kF32;
      Result<bench::Table> t = with_progress("requests", mem->first, bench::memory_scenario);
      if (!t) return t.take_error();
      Status s = emit(*t, mem->second);
      if (!s || mem->second.png.empty()) return s;
      bench::Table steps = *t;
      steps.rows.resize(steps.rows.size() - 2);  // the peak and pool rows have no step
      return plot_png(steps, mem->second.png, {.ys = {3, 5, 7}});
    };
  });
}

// bench e2e: llama-bench-style pp/tg tokens per second, optionally beside the peer.
void add_e2e_bench(CLI::App& cmd, const RunSlot& run_fn) {
  auto e2e = std::make_shared<E2eCli>();
  CLI::App* e = cmd.add_subcommand("e2e", "llama-bench-style pp/tg tokens per second on one model file");
  e->add_option("-m,--model", e2e->o.model, "model (any --model form)")->required();
  e->add_option("--threads", e2e->o.threads, "threads")->capture_default_str()->check(CLI::Range(1, 256));
  e->add_option("--pp", e2e->o.pp, "prompt tokens in the pp step (0: skip)")->capture_default_str();
  e->add_option("--tg", e2e->o.tg, "generated tokens in the tg run (0: skip)")->capture_default_str();
  e->add_option("--depth", e2e->o.depth, "context depth both start at")->capture_default_str();
  e->add_option("--repeats", e2e->o.repeats, "timed repeats (median)")->capture_default_str();
  e->add_option("--kv-type", e2e->kv_type, "KV cache element type, for both engines (llama-bench's default is f16)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16"}));
  e->add_option("--device", e2e->device, "where kvforge's steps run: cpu, or cuda (the first GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  e->add_option("--dtype", e2e->dtype, "what products compute from: auto (16-bit inputs where a GPU's tensor cores run them) or f32")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "f32"}));
  e->add_option("--tp", e2e->o.tp,
                 "tensor-parallel ranks kvforge's steps run over (generate --tp: on CPU threads, or with --device cuda "
                 "rank r on GPU r over NCCL)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  e->add_option("--cp", e2e->o.cp,
                 "context-parallel ranks kvforge's decode attention runs over (with --device cuda: rank r on GPU r over "
                 "NCCL, each reading its 16-token blocks of the cache; generate --cp)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  e->add_option("--lora", e2e->o.lora,
                "a LoRA adapter every token runs with (a PEFT directory, a GGUF LoRA, or synthetic:r<RANK>), measured in turn "
                "with the model without it");
  e->add_option("--skip-pass", e2e->o.skip_passes,
                "a compiler pass to leave out (repeatable; attention, fusion, moe, ...): the unfused form, for comparison");
  e->add_option("--peer", e2e->peer, "llama.cpp's llama-bench binary: run it on the same file and print the ratio");
  e->add_flag("--json", e2e->json, "print one JSON line");
  e->callback([=] {
    e2e->o.kv_dtype = e2e->kv_type == "f32" ? DType::kF32 : DType::kF16;
    e2e->o.cuda = e2e->device == "cuda";
    e2e->o.f32_compute = e2e->dtype == "f32";
    *run_fn = [=] { return run_e2e(*e2e); };
  });
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand("bench", "Benchmark scenarios (medians over repeats; docs/benchmarks.md)");
  cmd->require_subcommand(1);
  auto run_fn = std::make_shared<std::function<Status()>>();
  add_attention_bench(*cmd, run_fn);
  add_decode_curve_bench(*cmd, run_fn);
  add_memory_bench(*cmd, run_fn);
  add_e2e_bench(*cmd, run_fn);
  return {cmd, [run_fn]() -> Status { return *run_fn ? (*run_fn)() : invalid_input("bench: no scenario"); }};
}

}  // namespace kvf::cli
