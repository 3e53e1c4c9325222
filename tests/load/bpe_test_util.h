// Shared by the byte-level BPE and HF tokenizer tests: llama.cpp's tokenizer test vectors
// (.inp/.out) and byte-level BPE Vocabs read from llama.cpp's vocab GGUFs.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "load/gguf.h"
#include "load/vocab_readers.h"

namespace kvf::testing {

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// llama.cpp's test-tokenizer-0 fixtures: inputs separated by "\n__ggml_vocab_test__\n",
// and one line of space-separated expected ids (no BOS) per input.
struct TokenizerVectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> ids;
};

inline TokenizerVectors read_vectors(const std::string& inp_path, const std::string& out_path) {
  TokenizerVectors v;
  const std::string inp = read_text_file(inp_path), out = read_text_file(out_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inp.size();) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) next = inp.size();
    v.inputs.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream nums(line);
    std::vector<int32_t> ids;
    for (long id; nums >> id;) ids.push_back(static_cast<int32_t>(id));
    v.ids.push_back(std::move(ids));
  }
  return v;
}

// A byte-level BPE vocab from a llama.cpp vocab GGUF, through load::vocab_from_gguf.
inline Result<load::Vocab> bpe_vocab_from_gguf(const std::string& path) {
  Result<load::GgufFile> f = load::read_gguf(path);
  if (!f.ok()) return f.take_error();
  return load::vocab_from_gguf(*f);
}


}  // namespace kvf::testing
