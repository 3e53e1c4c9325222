// GGUF v2/v3 reader: metadata of every value type, tensor infos, alignment, and tensors
// borrowed from the memory map (or dequantized to f32 for types kvforge does not compute
// on). Every malformed byte is a typed error naming the file and the offset or field.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "load/mapped_file.h"

namespace kvf::load {

enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
std::string_view gguf_type_name(GgufValueType t);

// One scalar as read: unsigned, signed, float, bool or string.
using GgufScalar = std::variant<uint64_t, int64_t, double, bool, std::string>;

struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  GgufScalar scalar;                           // when type != kArray
  GgufValueType elem_type = GgufValueType::kU8;  // when type == kArray
  std::vector<GgufScalar> array;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the fastest-moving (row) dimension
  uint32_t type = 0;        // a GgmlType id
  uint64_t offset = 0;      // from the start of the data section
  int64_t nbytes = 0;
  Shape shape() const;      // row-major: ne reversed
};

class GgufFile {
 public:
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;
  std::string path;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;                       // in file order

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;

  // Typed metadata access; a missing key or a wrong type is an error naming the key.
  Result<std::string> get_string(const std::string& key) const;
  Result<int64_t> get_int(const std::string& key) const;    // any integer type
  Result<double> get_float(const std::string& key) const;   // any number type
  Result<bool> get_bool(const std::string& key) const;
  Result<std::vector<std::string>> get_strings(const std::string& key) const;
  Result<std::vector<double>> get_numbers(const std::string& key) const;
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_float_or(const std::string& key, double fallback) const;

  // The tensor's bytes: borrowed from the mapping when its type is a DType, otherwise
  // dequantized into an owned f32 tensor. Shape is row-major (ne reversed).
  Result<HostTensor> tensor(const std::string& name) const;

  std::span<const uint8_t> bytes() const;

 private:
  friend Result<GgufFile> parse_gguf(std::shared_ptr<const MappedFile>);
  friend Result<GgufFile> parse_gguf_bytes(std::span<const uint8_t>, const std::string&);
  std::shared_ptr<const MappedFile> file_;
  std::span<const uint8_t> bytes_;
  std::map<std::string, size_t> kv_index_, tensor_index_;
};

Result<GgufFile> read_gguf(const std::string& path);
Result<GgufFile> parse_gguf(std::shared_ptr<const MappedFile> file);
// Parses bytes the caller keeps alive for the file's lifetime (tests, fuzzing).
Result<GgufFile> parse_gguf_bytes(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace kvf::load
