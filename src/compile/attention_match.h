// The attention rewrite's matcher, private to compile/ (attention.cpp) and its tests: at a
// final MatMul(p, v_exp) it walks the whole ops::attention_* chain back to q, k, v and says
// which eqns one Attention eqn would replace, or the first check that failed.
// The rules and the refusals are written up in docs/attention.md. It applies its own
// matches (not compile/match.h's applier): k and v may each be read through a reshape.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compile/match.h"
#include "ir/graph.h"

namespace kvf::compile::attention {

// An operand of the fused eqn: a value of the graph, read through a reshape when `reshape`
// is set (canonicalize folds repeat_kv's first reshape into the one before it, which leaves
// no [B, Hkv, L, D] value of the key to read).
struct AttnOperand {
  ir::ValueId value = -1;
  Shape reshape;  // empty: the value as it is
};

// One attention chain: the fused eqn's params and operands, and the eqns it replaces.
struct AttnMatch {
  size_t root = 0;  // the final MatMul(p, v_exp)
  ir::AttnParams params;
  std::vector<AttnOperand> operands;  // q, k, v [, k_shared] [, mask] [, len] [, read], the order AttnParams gives
  std::vector<size_t> absorbed;       // indices of the eqns it replaces, root included, ascending
  // k and v are gathered views of pools (transpose(gather(pool, read), (0,2,1,3))) that the
  // op still reads as views, not through the map: why the paged-key form was not proven.
  // Empty when the keys are no such views or the op reads the pools (params.has_read).
  std::string kept_view;
};

struct MatchResult {
  std::optional<AttnMatch> match;
  std::string why_not;  // without a match: the first check that failed, for docs and tests
};

// The attention chain ending at eqn `root`, or why the pass must keep its decomposition.
MatchResult match_attention(const ir::Graph& g, const Uses& uses, size_t root);

}  // namespace kvf::compile::attention
