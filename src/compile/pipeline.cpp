#include "compile/pipeline.h"

namespace kvf::compile {

Result<Compiled> run_passes(const ir::Graph& g, const std::vector<Pass>& passes) {
  Compiled c;
  c.graph = g;
  for (const Pass& p : passes) {
    Result<ir::Graph> next = p.run(c.graph);
    if (!next) return next.take_error().context(str_cat("pass ", p.name));
    Status ok = ir::verify(*next);
    if (!ok) return internal_error("pass ", p.name, " broke the graph: ", ok.error().message());
    c.graph = std::move(*next);
    c.applied.push_back(p.name);
  }
  return c;
}

}  // namespace kvf::compile
