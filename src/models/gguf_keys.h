// The GGUF metadata the llama-like codecs share ("<arch>.embedding_length" and the rest, as
// llama.cpp's loader reads them: counts u32, scales f32), for gguf_codec*.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "core/error.h"
#include "load/gguf.h"
#include "load/gguf_writer.h"
#include "models/model_config.h"

namespace kvf::models {

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// Integer keys "<arch>.<key>" that must be present, read in order.
Status read_required(const load::GgufFile& f, const std::string& arch,
                     std::initializer_list<std::pair<const char*, int64_t*>> keys);
// Width, depth, heads, head size, context, RMSNorm epsilon, rope base and rotary width,
// sliding window; the rope layout is the architecture's.
Status read_llama_like(const load::GgufFile& f, const std::string& arch, ir::ops::RopeLayout layout, ModelConfig& c);
// The same keys written (and the expert counts when the model has experts).
void write_llama_like(const ModelConfig& c, const std::string& arch, load::GgufWriter& w);

}  // namespace kvf::models
