// Pieces of the byte-level BPE tokenizer that the HF reader and the tests use directly:
// the pre-tokenizer split and GPT-2's byte <-> printable-unicode alphabet.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "load/tokenizer.h"

namespace kvf::load {

// pre's split regexes, applied in turn: each cuts every chunk the previous ones made into its
// matches and the stretches between them (HF's Sequence of Split pre-tokenizers, "Isolated").
std::span<const char* const> bpe_split_regexes(PreTokenizer pre);

// Every pre-tokenizer, and each one's tokenizer.ggml.pre name (GGUF) and back; a name
// llama.cpp gives the same split (mpt, refact, ...) maps to the same PreTokenizer.
std::span<const PreTokenizer> all_pre_tokenizers();
std::string_view pre_tokenizer_name(PreTokenizer pre);
std::optional<PreTokenizer> pre_tokenizer_named(std::string_view gguf_name);

// The chunks pre's split regexes cut text into, in order; they concatenate back to text.
// Bytes no match covers (invalid UTF-8) come out as chunks of their own.
Result<std::vector<std::string>> bpe_pre_split(PreTokenizer pre, std::string_view text);

// Each byte as GPT-2's printable stand-in character ("Ġ" for a space), and back. Characters
// outside that alphabet map back to their own UTF-8 bytes.
std::string bytes_to_bpe_unicode(std::string_view bytes);
std::string bpe_unicode_to_bytes(std::string_view text);

}  // namespace kvf::load
