// GGUF v3 writer: metadata and tensors, laid out as llama.cpp expects (32-byte alignment
// unless general.alignment says otherwise). Used by `kvforge convert` and by tests that
// need GGUF files of their own.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "load/gguf.h"

namespace kvf::load {

class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);
  void set_string(const std::string& key, std::string v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_strings(const std::string& key, const std::vector<std::string>& v);
  void set_f32s(const std::string& key, const std::vector<float>& v);
  void set_i32s(const std::string& key, const std::vector<int32_t>& v);

  // ne in ggml order (ne[0] = row length). bytes must hold exactly the tensor's data.
  Status add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> ne,
                    std::span<const uint8_t> bytes);

  std::vector<uint8_t> serialize() const;
  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace kvf::load
