// GGUF serialization: header, metadata, tensor infos, aligned data.
#include "load/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "load/ggml_types.h"

namespace kvf::load {
namespace {

class Out {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf.insert(buf.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    buf.insert(buf.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t align) {
    while (buf.size() % align) buf.push_back(0);
  }
  std::vector<uint8_t> buf;
};

void put_scalar(Out& o, GgufValueType t, const GgufScalar& s) {
  auto num = [&]() -> double {
    if (auto* u = std::get_if<uint64_t>(&s)) return static_cast<double>(*u);
    if (auto* i = std::get_if<int64_t>(&s)) return static_cast<double>(*i);
    if (auto* d = std::get_if<double>(&s)) return *d;
    if (auto* b = std::get_if<bool>(&s)) return *b ? 1 : 0;
    return 0;
  };
  auto uint = [&]() -> uint64_t {
    if (auto* u = std::get_if<uint64_t>(&s)) return *u;
    return static_cast<uint64_t>(num());
  };
  auto sint = [&]() -> int64_t {
    if (auto* i = std::get_if<int64_t>(&s)) return *i;
    return static_cast<int64_t>(num());
  };
  switch (t) {
    case GgufValueType::kU8: o.put<uint8_t>(static_cast<uint8_t>(uint())); break;
    case GgufValueType::kI8: o.put<int8_t>(static_cast<int8_t>(sint())); break;
    case GgufValueType::kU16: o.put<uint16_t>(static_cast<uint16_t>(uint())); break;
    case GgufValueType::kI16: o.put<int16_t>(static_cast<int16_t>(sint())); break;
    case GgufValueType::kU32: o.put<uint32_t>(static_cast<uint32_t>(uint())); break;
    case GgufValueType::kI32: o.put<int32_t>(static_cast<int32_t>(sint())); break;
    case GgufValueType::kF32: o.put<float>(static_cast<float>(num())); break;
    case GgufValueType::kBool: o.put<uint8_t>(num() != 0 ? 1 : 0); break;
    case GgufValueType::kString: o.put_string(std::get<std::string>(s)); break;
    case GgufValueType::kU64: o.put<uint64_t>(uint()); break;
    case GgufValueType::kI64: o.put<int64_t>(sint()); break;
    case GgufValueType::kF64: o.put<double>(num()); break;
    case GgufValueType::kArray: break;  // not a scalar
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::set_string(const std::string& key, std::string v) {
  set(key, GgufValue{GgufValueType::kString, GgufScalar(std::move(v)), {}, {}});
}
void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  set(key, GgufValue{GgufValueType::kU32, GgufScalar(uint64_t{v}), {}, {}});
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  set(key, GgufValue{GgufValueType::kI32, GgufScalar(int64_t{v}), {}, {}});
}
void GgufWriter::set_f32(const std::string& key, float v) {
  set(key, GgufValue{GgufValueType::kF32, GgufScalar(double{v}), {}, {}});
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  set(key, GgufValue{GgufValueType::kBool, GgufScalar(v), {}, {}});
}
void GgufWriter::set_strings(const std::string& key, const std::vector<std::string>& v) {
  GgufValue a{GgufValueType::kArray, {}, GgufValueType::kString, {}};
  for (const std::string& s : v) a.array.emplace_back(s);
  set(key, std::move(a));
}
void GgufWriter::set_f32s(const std::string& key, const std::vector<float>& v) {
  GgufValue a{GgufValueType::kArray, {}, GgufValueType::kF32, {}};
  for (float x : v) a.array.emplace_back(double{x});
  set(key, std::move(a));
}
void GgufWriter::set_i32s(const std::string& key, const std::vector<int32_t>& v) {
  GgufValue a{GgufValueType::kArray, {}, GgufValueType::kI32, {}};
  for (int32_t x : v) a.array.emplace_back(int64_t{x});
  set(key, std::move(a));
}

Status GgufWriter::add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> ne,
                              std::span<const uint8_t> bytes) {
  Result<GgmlTypeInfo> info = ggml_type_info(ggml_type);
  if (!info) return info.take_error();
  int64_t numel = 1;
  for (int64_t d : ne) numel *= d;
  if (ne.empty() || ne[0] % info->block_elems != 0) return invalid_input("gguf writer: tensor ", name, " has a partial block");
  const int64_t need = numel / info->block_elems * info->block_bytes;
  if (static_cast<int64_t>(bytes.size()) != need) {
    return invalid_input("gguf writer: tensor ", name, " needs ", need, " bytes, got ", bytes.size());
  }
  tensors_.push_back({name, ggml_type, std::move(ne), {bytes.begin(), bytes.end()}});
  return {};
}

std::vector<uint8_t> GgufWriter::serialize() const {
  uint64_t align = 32;
  for (const auto& [k, v] : kv_) {
    if (k == "general.alignment") {
      if (auto* u = std::get_if<uint64_t>(&v.scalar)) align = *u;
    }
  }
  Out o;
  o.put<uint32_t>(0x46554747);
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    o.put_string(k);
    o.put<uint32_t>(static_cast<uint32_t>(v.type));
    if (v.type != GgufValueType::kArray) {
      put_scalar(o, v.type, v.scalar);
      continue;
    }
    o.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
    o.put<uint64_t>(v.array.size());
    for (const GgufScalar& s : v.array) put_scalar(o, v.elem_type, s);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    o.put_string(t.name);
    o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) o.put<uint64_t>(static_cast<uint64_t>(d));
    o.put<uint32_t>(t.type);
    o.put<uint64_t>(offset);
    offset += (t.data.size() + align - 1) / align * align;
  }
  o.pad_to(align);
  for (const Tensor& t : tensors_) {
    o.buf.insert(o.buf.end(), t.data.begin(), t.data.end());
    o.pad_to(align);
  }
  return std::move(o.buf);
}

Status GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return invalid_input(path, ": cannot open for writing");
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return invalid_input(path, ": write failed");
  return {};
}

}  // namespace kvf::load
