#include "compile/passes.h"

namespace kvf::compile {

std::vector<Pass> default_passes() {
  return {canonicalize_pass(), cse_pass(), rope_pass(), attention_pass(), selection_pass(), dce_pass(), fusion_pass(), moe_pass(), lora_pass()};
}

}  // namespace kvf::compile
