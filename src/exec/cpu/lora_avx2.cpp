// The LoRA up-product's AVX2 body (lora_up.h's loops, 8 columns a vector). Built with AVX2
// flags only; lora.cpp calls it when the CPU has them.
#include "exec/cpu/isa_avx2.h"
#include "exec/cpu/lora_up.h"

namespace kvf::exec::cpu {

void lora_up_avx2(const LoraUp& u) { detail::lora_up_with<Avx2>(u); }

}  // namespace kvf::exec::cpu
