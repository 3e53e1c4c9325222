// The LoRA up-product's AVX-512 body (lora_up.h's loops, 16 columns a vector). Built with
// AVX-512 flags only; lora.cpp calls it when the CPU has them.
// GCC 12's _mm512_cvtph_ps trips -W(maybe-)uninitialized on the header's own placeholder once
// inlined (GCC PR 105593); nothing here is read uninitialized.
#if defined(__GNUC__) && !defined(__clang__)  // clang has neither warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "exec/cpu/isa_avx512.h"
#include "exec/cpu/lora_up.h"

namespace kvf::exec::cpu {

void lora_up_avx512(const LoraUp& u) { detail::lora_up_with<Avx512>(u); }

}  // namespace kvf::exec::cpu
