// Mixture-of-experts feed-forward, traced from primitives so that the oracle defines it:
// router logits, softmax scores, each token's top-k experts by rank, their weights
// (renormalized and scaled as the config says), every routed expert's SwiGLU unit times its
// weight (0 where the token did not pick it), and the shared experts. Weights under
// blk.<l>.: ffn_gate_inp (router [E, dim]), ffn_{gate,up,down}_exp.<e>, ffn_{gate,up,down}_shexp.
#pragma once

#include <string>

#include "models/family.h"

namespace kvf::models {

// x: the normed hidden rows [1, n, dim]; `prefix` is "blk.<l>.". Returns [1, n, dim].
ir::V moe_ffn(const ModelConfig& cfg, const Weights& w, const std::string& prefix, ir::V x);

// scores [1, n, E] with all but each row's k largest set to 0. Expert e's rank is the number
// of experts that score above it, or the same with a lower index, so ties pick the lower
// index (torch.topk leaves the pick among exact ties open).
ir::V top_k_scores(ir::V scores, int64_t k);

}  // namespace kvf::models
