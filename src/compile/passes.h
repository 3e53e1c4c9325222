// The passes, one file each, and the fixed order they run in (DESIGN.md §3):
// canonicalize → cse → rope recognition → attention rewrite → selection → dce → fusion → moe →
// lora.
#pragma once

#include <vector>

#include "compile/pass.h"

namespace kvf::compile {

Pass canonicalize_pass();  // canonicalize.cpp: fold no-op reshapes/transposes/broadcasts/casts, x*1, x+0 ...
Pass cse_pass();           // cse.cpp: one eqn per (op, params, operands); equal literals merge
Pass rope_pass();          // rope.cpp: the apply_rope chain -> one Rope eqn
Pass attention_pass();     // attention.cpp: the ops::attention_* chains -> one Attention eqn
Pass selection_pass();     // selection.cpp: selected-block masks and block top-k -> SelectedAttention, BlockTopK
Pass dce_pass();           // dce.cpp: drops eqns no output, donation, validation or collective needs
Pass fusion_pass();        // fusion.cpp: rmsnorm, softmax rows, glu, linear (+ bias epilogue)
Pass moe_pass();           // moe.cpp: the routed experts' sum of fused units -> one Moe eqn
Pass lora_pass();          // lora.cpp: a projection plus its gathered LoRA term -> one Lora eqn

// All of the above, in order.
std::vector<Pass> default_passes();

}  // namespace kvf::compile
