// Placement of the fused Attention eqn on another target: the host executor binds the plan
// as usual and, for each Attention eqn, hands the resolved operands to a backend instead of
// running its own kernel; every other eqn stays on the host. Not a scheduler: it says where
// one eqn runs. The AHBM simulator's backend is exec/ahbm/attention_target.h.
#pragma once

#include <string>

#include "core/error.h"
#include "exec/attention_args.h"
#include "plan/request.h"

namespace kvf::exec {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string name() const = 0;
  // can_implement, once per Attention eqn when the host binds the plan: a shape, key form,
  // mask kind, score transform or size this backend does not run is a kUnsupported error
  // naming it, and the bind fails. `index` counts the plan's Attention eqns (the layer, for
  // one attention per layer).
  virtual Status check(const plan::AttentionRequest& r, int index) = 0;
  // Runs one checked eqn: reads the operands of `a` (the same view the CPU kernel gets:
  // q, the K/V cache as the host holds it, the live lengths, the mask, scale, n_rep =
  // hq / hkv) and writes a.out. A data-dependent case it does not cover (a mask that is not
  // causal over the visited keys) is kUnsupported, never a silently different answer.
  virtual Status run(const AttentionArgs& a, int index) = 0;
};

}  // namespace kvf::exec
