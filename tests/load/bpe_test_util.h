// Shared by the tokenizer tests: llama.cpp's tokenizer test vectors (.inp/.out, read by the
// SentencePiece, byte-level BPE and HF tests) and byte-level BPE Vocabs read from llama.cpp's
// vocab GGUFs.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "load/gguf.h"
#include "load/tokenizer.h"
#include "load/vocab_readers.h"
#include "testing.h"

namespace kvf::testing {

// llama.cpp's test-tokenizer-0 fixtures: inputs separated by "\n__ggml_vocab_test__\n",
// and one line of space-separated expected ids (no BOS) per input.
struct TokenizerVectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> ids;
};

inline TokenizerVectors read_vectors(const std::string& inp_path, const std::string& out_path) {
  TokenizerVectors v;
  const std::string inp = read_file(inp_path), out = read_file(out_path);
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

// Every vector encodes (without specials) to its ids and decodes back to its text; prints
// how many passed.
inline void expect_vectors_pass(const load::Tokenizer& tok, const TokenizerVectors& v, const std::string& name) {
  ASSERT_EQ(v.inputs.size(), v.ids.size()) << name;
  size_t passed = 0;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(v.inputs[i], /*add_special=*/false);
    EXPECT_EQ(got, v.ids[i]) << name << " vector " << i << ": \"" << v.inputs[i] << "\"";
    passed += got == v.ids[i];
    EXPECT_EQ(tok.decode(got), v.inputs[i]) << name << " vector " << i;
  }
  EXPECT_EQ(passed, v.inputs.size()) << name;
  std::printf("[ vectors  ] %s: %zu/%zu passed\n", name.c_str(), passed, v.inputs.size());
}

// A byte-level BPE vocab from a llama.cpp vocab GGUF, through load::vocab_from_gguf.
inline Result<load::Vocab> bpe_vocab_from_gguf(const std::string& path) {
  Result<load::GgufFile> f = load::read_gguf(path);
  if (!f.ok()) return f.take_error();
  return load::vocab_from_gguf(*f);
}

}  // namespace kvf::testing
