// Pieces of the byte-level BPE tokenizer that the HF reader and the tests use directly:
// the pre-tokenizer split and GPT-2's byte <-> printable-unicode alphabet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "load/tokenizer.h"

namespace kvf::load {

// pre's split regex as HF tokenizer.json (Split pre-tokenizer) and tiktoken spell it.
const char* bpe_split_regex(PreTokenizer pre);

// The chunks pre's split regex cuts text into, in order; they concatenate back to text.
// Bytes no match covers (invalid UTF-8) come out as chunks of their own.
Result<std::vector<std::string>> bpe_pre_split(PreTokenizer pre, std::string_view text);

// Each byte as GPT-2's printable stand-in character ("Ġ" for a space), and back. Characters
// outside that alphabet map back to their own UTF-8 bytes.
std::string bytes_to_bpe_unicode(std::string_view bytes);
std::string bpe_unicode_to_bytes(std::string_view text);

}  // namespace kvf::load
