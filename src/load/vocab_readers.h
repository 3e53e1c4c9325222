// Where vocabularies come from: llama2.c tokenizer.bin, GGUF tokenizer.ggml.* metadata,
// and Hugging Face tokenizer.json. Each returns a Vocab for Tokenizer::create, or a typed
// error naming the file and the field or offset that is wrong.
#pragma once

#include <string>

#include "load/gguf.h"
#include "load/tokenizer.h"

namespace kvf::load {

// llama2.c tokenizer.bin: int32 max_token_length, then vocab_size records of
// (f32 score, int32 len, bytes). Spaces are plain ' '; BOS = 1, EOS = 2 as llama2.c uses.
Result<Vocab> read_llama2c_vocab(const std::string& path, int32_t vocab_size);
Result<Vocab> parse_llama2c_vocab(std::span<const uint8_t> bytes, int32_t vocab_size, const std::string& name);

// tokenizer.ggml.model = "llama" (SPM) or "gpt2" (byte-level BPE) with tokens, scores,
// token types, merges, pre-tokenizer name and special token ids.
Result<Vocab> vocab_from_gguf(const GgufFile& f);

// Hugging Face tokenizer.json (model.type BPE, byte-level): vocab, merges, added tokens,
// pre-tokenizer (GPT-2, Llama 3 and Qwen2 split rules).
Result<Vocab> read_hf_tokenizer(const std::string& path);
Result<Vocab> parse_hf_tokenizer(const std::string& json_text, const std::string& name);

}  // namespace kvf::load
