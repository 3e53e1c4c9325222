// `kvforge compile`: trace one step of a model, run the passes, plan it for this CPU and
// print what each stage made of it (docs/attention.md quotes this output).
#include <cstdio>
#include <map>
#include <memory>

#include "cli/command.h"
#include "cli/model_options.h"
#include "compile/passes.h"
#include "compile/pipeline.h"
#include "ir/printer.h"
#include "plan/plan.h"

namespace kvf::cli {
namespace {

struct CompileOptions {
  ModelOptions model;
  int64_t tokens = 1;
  bool full = false;
  bool dump = false;
};

std::string op_counts(const ir::Graph& g) {
  std::map<std::string, int> n;
  for (const ir::Eqn& e : g.eqns) ++n[std::string(ir::op_name(e.op))];
  std::string s;
  for (const auto& [op, k] : n) s += str_cat(s.empty() ? "" : " ", op, "x", k);
  return s;
}

Status run(const CompileOptions& o) {
  Result<models::Model> m = open(o.model, false);
  if (!m) return m.take_error();
  const int64_t cap = std::max(capacity_for(o.model, *m), o.tokens);
  Result<ir::Graph> traced = m->trace_step({.n_tokens = o.tokens,
                                                 .capacity = cap,
                                                 .cached = !o.full,
                                                 .last_logits = false,
                                                 .kv_dtype = generator_options(o.model).kv_dtype});
  if (!traced) return traced.take_error();
  Result<compile::Compiled> c = compile::run_passes(*traced, compile::default_passes());
  if (!c) return c.take_error();
  if (o.dump) std::printf("# traced\n%s\n# compiled (%s)\n%s\n", ir::print(*traced).c_str(),
                          [&] {
                            std::string s;
                            for (const std::string& p : c->applied) s += (s.empty() ? "" : " -> ") + p;
                            return s;
                          }().c_str(),
                          ir::print(c->graph).c_str());
  std::printf("traced:   %zu eqns: %s\n", traced->eqns.size(), op_counts(*traced).c_str());
  std::printf("compiled: %zu eqns: %s\n", c->graph.eqns.size(), op_counts(c->graph).c_str());
  Result<plan::Plan> p = plan::make_plan(std::move(c->graph), plan::cpu_caps(o.model.threads));
  if (!p) return p.take_error();
  std::printf("%s", plan::describe(*p).c_str());
  return {};
}

}  // namespace

Command add_compile_command(CLI::App& parent) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "compile", "Trace one step of a model, run the compiler passes and plan it for this CPU; print the result");
  add_model_options(*cmd, o->model, {.runtime = true});
  cmd->add_option("--tokens", o->tokens, "tokens in the step (1: a decode step)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--full", o->full, "trace the uncached full forward instead of a cached step");
  cmd->add_flag("--dump", o->dump, "print the graph before and after the passes");
  return {cmd, [o] { return run(*o); }};
}

}  // namespace kvf::cli
