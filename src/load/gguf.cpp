// GGUF parsing with a bounds-checked cursor; nothing is trusted before it is checked.
#include "load/gguf.h"

#include <bit>
#include <cstring>

#include "load/ggml_types.h"

namespace kvf::load {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;

class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }

  template <class... Parts>
  Error fail(const Parts&... parts) const {
    return invalid_input(name_, ": offset ", pos_, ": ", parts...);
  }

  template <class T>
  Result<T> read(std::string_view what) {
    if (left() < sizeof(T)) return fail("truncated reading ", what, " (", sizeof(T), " bytes, ", left(), " left)");
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> read_string(std::string_view what) {
    Result<uint64_t> n = read<uint64_t>(what);
    if (!n) return n.take_error();
    if (*n > left()) return fail(what, ": string length ", *n, " exceeds the ", left(), " bytes left");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(*n));
    pos_ += *n;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;
};

// Smallest encoding of one value of each type: bounds array counts before allocating.
uint64_t min_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kBool: return 1;
    case GgufValueType::kU16: case GgufValueType::kI16: return 2;
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kF32: return 4;
    default: return 8;  // u64, i64, f64, string length, array header
  }
}

bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kF64); }

Result<GgufScalar> read_scalar(Cursor& c, GgufValueType t, const std::string& key) {
  auto widen = [](auto r) -> Result<GgufScalar> {
    if (!r) return r.take_error();
    using T = std::decay_t<decltype(*r)>;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return GgufScalar(static_cast<double>(*r));
    else if constexpr (std::is_signed_v<T>) return GgufScalar(static_cast<int64_t>(*r));
    else return GgufScalar(static_cast<uint64_t>(*r));
  };
  switch (t) {
    case GgufValueType::kU8: return widen(c.read<uint8_t>(key));
    case GgufValueType::kI8: return widen(c.read<int8_t>(key));
    case GgufValueType::kU16: return widen(c.read<uint16_t>(key));
    case GgufValueType::kI16: return widen(c.read<int16_t>(key));
    case GgufValueType::kU32: return widen(c.read<uint32_t>(key));
    case GgufValueType::kI32: return widen(c.read<int32_t>(key));
    case GgufValueType::kF32: return widen(c.read<float>(key));
    case GgufValueType::kU64: return widen(c.read<uint64_t>(key));
    case GgufValueType::kI64: return widen(c.read<int64_t>(key));
    case GgufValueType::kF64: return widen(c.read<double>(key));
    case GgufValueType::kBool: {
      Result<uint8_t> b = c.read<uint8_t>(key);
      if (!b) return b.take_error();
      if (*b > 1) return c.fail(key, ": bool byte is ", int{*b}, ", expected 0 or 1");
      return GgufScalar(*b == 1);
    }
    case GgufValueType::kString: {
      Result<std::string> s = c.read_string(key);
      if (!s) return s.take_error();
      return GgufScalar(std::move(*s));
    }
    case GgufValueType::kArray: break;
  }
  return c.fail(key, ": unexpected value type ", static_cast<uint32_t>(t));
}

Result<GgufValue> read_value(Cursor& c, const std::string& key) {
  Result<uint32_t> type = c.read<uint32_t>(key);
  if (!type) return type.take_error();
  if (!known_type(*type)) return c.fail(key, ": unknown value type ", *type);
  GgufValue v;
  v.type = static_cast<GgufValueType>(*type);
  if (v.type != GgufValueType::kArray) {
    Result<GgufScalar> s = read_scalar(c, v.type, key);
    if (!s) return s.take_error();
    v.scalar = std::move(*s);
    return v;
  }
  Result<uint32_t> et = c.read<uint32_t>(key);
  if (!et) return et.take_error();
  if (!known_type(*et)) return c.fail(key, ": unknown array element type ", *et);
  v.elem_type = static_cast<GgufValueType>(*et);
  if (v.elem_type == GgufValueType::kArray) return unsupported(key, ": nested GGUF arrays are not supported");
  Result<uint64_t> n = c.read<uint64_t>(key);
  if (!n) return n.take_error();
  if (*n > c.left() / min_size(v.elem_type)) {
    return c.fail(key, ": array of ", *n, " ", gguf_type_name(v.elem_type), " cannot fit in the ", c.left(), " bytes left");
  }
  v.array.reserve(static_cast<size_t>(*n));
  for (uint64_t i = 0; i < *n; ++i) {
    Result<GgufScalar> s = read_scalar(c, v.elem_type, key);
    if (!s) return s.take_error();
    v.array.push_back(std::move(*s));
  }
  return v;
}

Result<GgufTensorInfo> read_tensor_info(Cursor& c, uint64_t index) {
  const std::string what = str_cat("tensor info ", index);
  GgufTensorInfo t;
  Result<std::string> name = c.read_string(what);
  if (!name) return name.take_error();
  t.name = std::move(*name);
  Result<uint32_t> n_dims = c.read<uint32_t>(t.name);
  if (!n_dims) return n_dims.take_error();
  if (*n_dims == 0 || *n_dims > kMaxDims) return c.fail("tensor ", t.name, ": ", *n_dims, " dims (expected 1..4)");
  int64_t numel = 1;
  for (uint32_t d = 0; d < *n_dims; ++d) {
    Result<uint64_t> ne = c.read<uint64_t>(t.name);
    if (!ne) return ne.take_error();
    if (*ne > (uint64_t{1} << 40) || (*ne != 0 && static_cast<uint64_t>(numel) > (uint64_t{1} << 50) / *ne)) {
      return c.fail("tensor ", t.name, ": dimension ", d, " = ", *ne, " is too large");
    }
    t.ne.push_back(static_cast<int64_t>(*ne));
    numel *= static_cast<int64_t>(*ne);
  }
  Result<uint32_t> type = c.read<uint32_t>(t.name);
  if (!type) return type.take_error();
  t.type = *type;
  Result<GgmlTypeInfo> info = ggml_type_info(t.type);
  if (!info) return info.take_error().context(c.fail("tensor ", t.name).message());
  if (t.ne[0] % info->block_elems != 0) {
    return c.fail("tensor ", t.name, ": row of ", t.ne[0], " is not a multiple of the ", info->name, " block of ",
                  info->block_elems);
  }
  t.nbytes = numel / info->block_elems * info->block_bytes;
  Result<uint64_t> off = c.read<uint64_t>(t.name);
  if (!off) return off.take_error();
  t.offset = *off;
  return t;
}

}  // namespace

std::string_view gguf_type_name(GgufValueType t) {
  static constexpr std::string_view kNames[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : "?";
}

Shape GgufTensorInfo::shape() const { return Shape(ne.rbegin(), ne.rend()); }

Result<GgufFile> parse_gguf_bytes(std::span<const uint8_t> bytes, const std::string& name) {
  Cursor c(bytes, name);
  Result<uint32_t> magic = c.read<uint32_t>("magic");
  if (!magic) return magic.take_error();
  if (*magic != kMagic) return invalid_input(name, ": not a GGUF file (bad magic)");
  GgufFile f;
  f.path = name;
  f.bytes_ = bytes;
  Result<uint32_t> version = c.read<uint32_t>("version");
  if (!version) return version.take_error();
  if (*version != 2 && *version != 3) return unsupported(name, ": GGUF version ", *version, " (kvforge reads v2 and v3)");
  f.version = *version;
  Result<uint64_t> n_tensors = c.read<uint64_t>("tensor count");
  if (!n_tensors) return n_tensors.take_error();
  Result<uint64_t> n_kv = c.read<uint64_t>("metadata count");
  if (!n_kv) return n_kv.take_error();
  if (*n_kv > c.left() / 12 || *n_tensors > c.left() / 24) {
    return c.fail("counts of ", *n_kv, " metadata entries and ", *n_tensors, " tensors cannot fit the file");
  }
  for (uint64_t i = 0; i < *n_kv; ++i) {
    Result<std::string> key = c.read_string(str_cat("key of metadata entry ", i));
    if (!key) return key.take_error();
    Result<GgufValue> v = read_value(c, *key);
    if (!v) return v.take_error();
    if (f.kv_index_.count(*key)) return c.fail("metadata key ", *key, " appears twice");
    f.kv_index_[*key] = f.metadata.size();
    f.metadata.emplace_back(std::move(*key), std::move(*v));
  }
  const int64_t align = f.get_int_or("general.alignment", 32);
  if (align <= 0 || !std::has_single_bit(static_cast<uint64_t>(align))) {
    return invalid_input(name, ": general.alignment ", align, " is not a power of two");
  }
  f.alignment = static_cast<uint64_t>(align);
  for (uint64_t i = 0; i < *n_tensors; ++i) {
    Result<GgufTensorInfo> t = read_tensor_info(c, i);
    if (!t) return t.take_error();
    if (f.tensor_index_.count(t->name)) return c.fail("tensor ", t->name, " appears twice");
    f.tensor_index_[t->name] = f.tensors.size();
    f.tensors.push_back(std::move(*t));
  }
  f.data_offset = (c.pos() + f.alignment - 1) / f.alignment * f.alignment;
  for (const GgufTensorInfo& t : f.tensors) {
    if (t.offset % f.alignment != 0) {
      return invalid_input(name, ": tensor ", t.name, ": offset ", t.offset, " is not aligned to ", f.alignment);
    }
    const uint64_t end = f.data_offset + t.offset + static_cast<uint64_t>(t.nbytes);
    if (t.offset > bytes.size() || end > bytes.size() || end < f.data_offset) {
      return invalid_input(name, ": tensor ", t.name, ": data [", f.data_offset + t.offset, ", ", end,
                           ") lies past the end of the file (", bytes.size(), " bytes)");
    }
  }
  return f;
}

Result<GgufFile> parse_gguf(std::shared_ptr<const MappedFile> file) {
  Result<GgufFile> f = parse_gguf_bytes(file->bytes(), file->path());
  if (!f) return f;
  f->file_ = std::move(file);
  return f;
}

Result<GgufFile> read_gguf(const std::string& path) {
  Result<std::shared_ptr<const MappedFile>> file = MappedFile::open(path);
  if (!file) return file.take_error();
  return parse_gguf(std::move(*file));
}

std::span<const uint8_t> GgufFile::bytes() const { return bytes_; }

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &metadata[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

namespace {

Error wrong_type(const std::string& path, const std::string& key, const GgufValue& v, std::string_view want) {
  return invalid_input(path, ": metadata ", key, " is ", gguf_type_name(v.type), ", expected ", want);
}

std::optional<double> as_number(const GgufScalar& s) {
  if (auto* u = std::get_if<uint64_t>(&s)) return static_cast<double>(*u);
  if (auto* i = std::get_if<int64_t>(&s)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&s)) return *d;
  return std::nullopt;
}

}  // namespace

Result<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return invalid_input(path, ": metadata ", key, " is missing");
  if (auto* s = std::get_if<std::string>(&v->scalar); s && v->type == GgufValueType::kString) return *s;
  return wrong_type(path, key, *v, "string");
}

Result<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return invalid_input(path, ": metadata ", key, " is missing");
  if (v->type != GgufValueType::kArray) {
    if (auto* u = std::get_if<uint64_t>(&v->scalar)) {
      if (*u > static_cast<uint64_t>(INT64_MAX)) return invalid_input(path, ": metadata ", key, " = ", *u, " is too large");
      return static_cast<int64_t>(*u);
    }
    if (auto* i = std::get_if<int64_t>(&v->scalar)) return *i;
  }
  return wrong_type(path, key, *v, "an integer");
}

Result<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return invalid_input(path, ": metadata ", key, " is missing");
  if (v->type != GgufValueType::kArray) {
    if (std::optional<double> d = as_number(v->scalar)) return *d;
  }
  return wrong_type(path, key, *v, "a number");
}

Result<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return invalid_input(path, ": metadata ", key, " is missing");
  if (auto* b = std::get_if<bool>(&v->scalar); b && v->type == GgufValueType::kBool) return *b;
  return wrong_type(path, key, *v, "bool");
}

Result<std::vector<std::string>> GgufFile::get_strings(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return invalid_input(path, ": metadata ", key, " is missing");
  if (v->type != GgufValueType::kArray || v->elem_type != GgufValueType::kString) {
    return wrong_type(path, key, *v, "an array of strings");
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const GgufScalar& s : v->array) out.push_back(std::get<std::string>(s));
  return out;
}

Result<std::vector<double>> GgufFile::get_numbers(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return invalid_input(path, ": metadata ", key, " is missing");
  if (v->type != GgufValueType::kArray || v->elem_type == GgufValueType::kString) {
    return wrong_type(path, key, *v, "an array of numbers");
  }
  std::vector<double> out;
  out.reserve(v->array.size());
  for (const GgufScalar& s : v->array) {
    std::optional<double> d = as_number(s);
    out.push_back(d ? *d : (std::get<bool>(s) ? 1.0 : 0.0));
  }
  return out;
}

int64_t GgufFile::get_int_or(const std::string& key, int64_t fallback) const {
  if (!find(key)) return fallback;
  Result<int64_t> v = get_int(key);
  return v.ok() ? *v : fallback;
}

double GgufFile::get_float_or(const std::string& key, double fallback) const {
  if (!find(key)) return fallback;
  Result<double> v = get_float(key);
  return v.ok() ? *v : fallback;
}

Result<HostTensor> GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) return invalid_input(path, ": no tensor named ", name);
  const uint8_t* data = bytes_.data() + data_offset + t->offset;
  std::shared_ptr<const void> keep(file_, file_.get());
  if (std::optional<DType> dt = ggml_storage_dtype(t->type)) {
    Result<HostTensor> h = HostTensor::borrow(*dt, t->shape(), data, t->nbytes, keep);
    if (!h) return h.take_error().context(path, ": tensor ", name);
    return h;
  }
  Result<HostTensor> h = HostTensor::zeros(DType::kF32, t->shape());
  if (!h) return h.take_error().context(path, ": tensor ", name);
  Status s = ggml_dequantize(t->type, data, h->data<float>(), h->numel());
  if (!s) return s.take_error().context(path, ": tensor ", name);
  return h;
}

}  // namespace kvf::load
