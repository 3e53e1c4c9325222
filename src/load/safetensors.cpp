// safetensors parsing: the u64 header length, the JSON header (read without exceptions, every
// field type-checked before use), byte ranges checked against the data section, and the
// sharded index. Nothing in the file is trusted before it is checked.
#include "load/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "load/mapped_file.h"

namespace kvf::load {

using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // 100 MB: far beyond any real header
constexpr uint64_t kMaxDim = uint64_t{1} << 62;

struct DtypeSize {
  std::string_view name;
  int64_t size;
};
constexpr DtypeSize kDtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2}, {"I64", 8},     {"I32", 4},     {"I16", 2},     {"I8", 1},
    {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
};

// Where in which file: errors read "<file>: <where>: <what>".
struct Ctx {
  const std::string& file;
  template <class... Parts>
  Error bad(const Parts&... parts) const { return invalid_input(file, ": ", parts...); }
};

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A non-negative JSON integer no larger than `limit`, or an error naming `field`.
Result<uint64_t> read_count(const Ctx& ctx, const json& j, const std::string& field, uint64_t limit) {
  if (j.is_number_integer() && !j.is_number_unsigned()) return ctx.bad(field, ": ", j.dump(), " is negative");
  if (!j.is_number_unsigned()) return ctx.bad(field, ": is ", j.type_name(), "; expected a non-negative integer");
  const uint64_t v = j.get<uint64_t>();
  if (v > limit) return ctx.bad(field, ": ", v, " is too large");
  return v;
}

Result<Shape> read_shape(const Ctx& ctx, const json& j, const std::string& where) {
  if (!j.is_array()) return ctx.bad(where, ".shape: is ", j.type_name(), "; expected an array");
  Shape shape;
  for (size_t i = 0; i < j.size(); ++i) {
    Result<uint64_t> d = read_count(ctx, j[i], str_cat(where, ".shape[", i, "]"), kMaxDim);
    if (!d) return d.take_error();
    shape.push_back(static_cast<int64_t>(*d));
  }
  Result<int64_t> n = checked_numel(shape);
  if (!n) return ctx.bad(where, ".shape: ", n.take_error().message());
  return shape;
}

Status read_offsets(const Ctx& ctx, const json& j, const std::string& where, SafetensorsTensorInfo& t) {
  if (!j.is_array() || j.size() != 2) {
    return ctx.bad(where, ".data_offsets: is ", j.dump(), "; expected [begin, end]");
  }
  Result<uint64_t> begin = read_count(ctx, j[0], where + ".data_offsets[0]", UINT64_MAX);
  if (!begin) return begin.take_error();
  Result<uint64_t> end = read_count(ctx, j[1], where + ".data_offsets[1]", UINT64_MAX);
  if (!end) return end.take_error();
  if (*end < *begin) return ctx.bad(where, ".data_offsets: end ", *end, " is before begin ", *begin);
  t.begin = *begin;
  t.end = *end;
  return Status();
}

// obj[key], which must be present (null counts as absent).
Result<const json*> need(const Ctx& ctx, const json& obj, const std::string& where, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return ctx.bad(where, ".", key, ": missing");
  return &*it;
}

Result<SafetensorsTensorInfo> read_entry(const Ctx& ctx, const std::string& name, const json& v, uint64_t data_size,
                                         uint64_t data_start) {
  const std::string where = "tensor " + name;
  if (!v.is_object()) return ctx.bad(where, ": is ", v.type_name(), "; expected an object");
  SafetensorsTensorInfo t;
  t.name = name;
  Result<const json*> dtype = need(ctx, v, where, "dtype");
  if (!dtype) return dtype.take_error();
  if (!(*dtype)->is_string()) return ctx.bad(where, ".dtype: is ", (*dtype)->type_name(), "; expected a string");
  t.dtype = *(*dtype)->get_ptr<const std::string*>();
  Result<const json*> shape = need(ctx, v, where, "shape");
  if (!shape) return shape.take_error();
  Result<Shape> s = read_shape(ctx, **shape, where);
  if (!s) return s.take_error();
  t.shape = std::move(*s);
  Result<const json*> offs = need(ctx, v, where, "data_offsets");
  if (!offs) return offs.take_error();
  Status os = read_offsets(ctx, **offs, where, t);
  if (!os) return os.take_error();
  if (t.end > data_size) {
    return ctx.bad(where, ".data_offsets: [", t.begin, ", ", t.end, ") runs past the data section of ", data_size,
                   " bytes (file offset ", data_start, ")");
  }
  const int64_t esize = safetensors_dtype_size(t.dtype);
  if (esize == 0) return t;  // unknown dtype: listed, refused by tensor()
  Result<int64_t> n = checked_numel(t.shape);
  if (!n) return ctx.bad(where, ".shape: ", n.take_error().message());
  const int64_t numel = *n;
  if (numel > INT64_MAX / esize || static_cast<uint64_t>(numel * esize) != t.end - t.begin) {
    return ctx.bad(where, ": ", t.end - t.begin, " bytes in data_offsets but ", t.dtype, shape_str(t.shape),
                   " needs ", numel, " x ", esize);
  }
  return t;
}

Status read_metadata(const Ctx& ctx, const json& v, std::map<std::string, std::string>& out) {
  if (!v.is_object()) return ctx.bad("__metadata__: is ", v.type_name(), "; expected an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it->is_string()) return ctx.bad("__metadata__.", it.key(), ": is ", it->type_name(), "; expected a string");
    out[it.key()] = *it->get_ptr<const std::string*>();
  }
  return Status();
}

// Parses the header JSON, refusing a tensor name given twice (which a DOM parse would hide).
Result<json> parse_header_json(const Ctx& ctx, std::string_view text) {
  std::set<std::string> seen;
  std::string dup;
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& key = *parsed.get_ptr<const std::string*>();
      if (!seen.insert(key).second && dup.empty()) dup = key;
    }
    return true;
  };
  json root = json::parse(text, cb, false);
  if (root.is_discarded()) return ctx.bad("header at offset 8: not valid JSON");
  if (!dup.empty()) return ctx.bad("header at offset 8: tensor ", dup, " appears twice");
  if (!root.is_object()) return ctx.bad("header at offset 8: is ", root.type_name(), "; expected an object");
  return root;
}

// Refuses two tensors whose non-empty byte ranges overlap.
Status check_overlaps(const Ctx& ctx, std::vector<const SafetensorsTensorInfo*> ts) {
  std::sort(ts.begin(), ts.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  const SafetensorsTensorInfo* prev = nullptr;
  for (const SafetensorsTensorInfo* t : ts) {
    if (t->begin == t->end) continue;
    if (prev != nullptr && t->begin < prev->end) {
      return ctx.bad("tensor ", t->name, ".data_offsets: [", t->begin, ", ", t->end, ") overlaps tensor ", prev->name,
                     " [", prev->begin, ", ", prev->end, ")");
    }
    prev = t;
  }
  return Status();
}

std::optional<DType> storage_dtype(const std::string& dtype) {
  if (dtype == "F32") return DType::kF32;
  if (dtype == "F16") return DType::kF16;
  if (dtype == "BF16") return DType::kBF16;
  if (dtype == "I32") return DType::kI32;
  if (dtype == "I8") return DType::kI8;
  return std::nullopt;
}

}  // namespace

// Fills a SafetensorsSet shard by shard; the only code that writes its private fields.
class SafetensorsBuilder {
 public:
  static Status add_shard(SafetensorsSet& set, std::span<const uint8_t> bytes, const std::string& path,
                          std::shared_ptr<const void> keepalive);
  static void finish(SafetensorsSet& set) {
    set.names_.clear();
    for (const auto& kv : set.index_) set.names_.push_back(kv.first);
  }
  static void set_path(SafetensorsSet& set, const std::string& path) { set.path_ = path; }
};

Status SafetensorsBuilder::add_shard(SafetensorsSet& set, std::span<const uint8_t> bytes, const std::string& path,
                                     std::shared_ptr<const void> keepalive) {
  const Ctx ctx{path};
  if (bytes.size() < 8) return ctx.bad("offset 0: truncated header length (", bytes.size(), " bytes, need 8)");
  const uint64_t n = read_u64_le(bytes.data());
  if (n > kMaxHeaderBytes) return ctx.bad("offset 0: header length ", n, " exceeds the 100 MB limit");
  if (n > bytes.size() - 8) {
    return ctx.bad("offset 0: header length ", n, " runs past the end of the file (", bytes.size(), " bytes)");
  }
  Result<json> root = parse_header_json(ctx, {reinterpret_cast<const char*>(bytes.data()) + 8, n});
  if (!root) return root.take_error();
  SafetensorsShard shard{path, bytes.subspan(8 + n), std::move(keepalive), {}};
  std::vector<SafetensorsTensorInfo> infos;
  for (auto it = root->begin(); it != root->end(); ++it) {
    if (it.key() == "__metadata__") {
      Status s = read_metadata(ctx, *it, shard.metadata);
      if (!s) return s;
      continue;
    }
    Result<SafetensorsTensorInfo> t = read_entry(ctx, it.key(), *it, shard.data.size(), 8 + n);
    if (!t) return t.take_error();
    t->shard = set.shards_.size();
    infos.push_back(std::move(*t));
  }
  std::vector<const SafetensorsTensorInfo*> ptrs;
  for (const SafetensorsTensorInfo& t : infos) ptrs.push_back(&t);
  Status ov = check_overlaps(ctx, std::move(ptrs));
  if (!ov) return ov;
  for (SafetensorsTensorInfo& t : infos) {
    if (auto it = set.index_.find(t.name); it != set.index_.end()) {
      return ctx.bad("tensor ", t.name, ": also in ", set.shards_[it->second.shard].path);
    }
    set.index_.emplace(t.name, std::move(t));
  }
  set.shards_.push_back(std::move(shard));
  return Status();
}

namespace {

Status add_file(SafetensorsSet& set, const std::string& path) {
  Result<std::shared_ptr<const MappedFile>> f = MappedFile::open(path);
  if (!f) return f.take_error();
  std::shared_ptr<const void> keep = *f;
  return SafetensorsBuilder::add_shard(set, (*f)->bytes(), path, std::move(keep));
}

Result<json> read_json_file(const std::string& path) {
  Result<std::shared_ptr<const MappedFile>> f = MappedFile::open(path);
  if (!f) return f.take_error();
  const auto bytes = (*f)->bytes();
  json root = json::parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), nullptr, false);
  if (root.is_discarded()) return invalid_input(path, ": not valid JSON");
  if (!root.is_object()) return invalid_input(path, ": is ", root.type_name(), "; expected an object");
  return root;
}

bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\\') == std::string::npos;
}

// weight_map as (tensor, shard file) pairs, each checked to be a string naming a plain file.
Result<std::vector<std::pair<std::string, std::string>>> read_weight_map(const Ctx& ctx, const json& root) {
  const auto wm = root.find("weight_map");
  if (wm == root.end() || wm->is_null()) return ctx.bad("weight_map: missing");
  if (!wm->is_object()) return ctx.bad("weight_map: is ", wm->type_name(), "; expected an object");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string where = str_cat("weight_map[\"", it.key(), "\"]");
    if (!it->is_string()) return ctx.bad(where, ": is ", it->type_name(), "; expected a shard file name");
    const std::string& shard = *it->get_ptr<const std::string*>();
    if (!plain_file_name(shard)) return ctx.bad(where, ": \"", shard, "\" is not a plain file name");
    out.emplace_back(it.key(), shard);
  }
  if (out.empty()) return ctx.bad("weight_map: is empty");
  return out;
}

Result<SafetensorsSet> open_index(const std::string& index_path) {
  const Ctx ctx{index_path};
  Result<json> root = read_json_file(index_path);
  if (!root) return root.take_error();
  Result<std::vector<std::pair<std::string, std::string>>> wm = read_weight_map(ctx, *root);
  if (!wm) return wm.take_error();
  const std::string dir = std::filesystem::path(index_path).parent_path().string();
  const std::string prefix = dir.empty() ? "" : dir + "/";
  SafetensorsSet set;
  SafetensorsBuilder::set_path(set, index_path);
  std::map<std::string, size_t> shard_index;  // file name -> position in set.shards()
  for (const auto& [tensor, shard] : *wm) {
    if (shard_index.count(shard)) continue;
    shard_index[shard] = set.shards().size();
    Status s = add_file(set, prefix + shard);
    if (!s) return s.take_error().context(index_path, ": weight_map[\"", tensor, "\"]: shard ", shard);
  }
  for (const auto& [tensor, shard] : *wm) {
    const SafetensorsTensorInfo* t = set.find(tensor);
    if (t == nullptr || t->shard != shard_index[shard]) {
      return ctx.bad("weight_map[\"", tensor, "\"]: shard ", shard, " has no tensor ", tensor);
    }
  }
  SafetensorsBuilder::finish(set);
  return set;
}

Result<SafetensorsSet> open_single(const std::string& path) {
  SafetensorsSet set;
  SafetensorsBuilder::set_path(set, path);
  Status s = add_file(set, path);
  if (!s) return s.take_error();
  SafetensorsBuilder::finish(set);
  return set;
}

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

int64_t safetensors_dtype_size(const std::string& dtype) {
  for (const DtypeSize& d : kDtypes) {
    if (d.name == dtype) return d.size;
  }
  return 0;
}

const SafetensorsTensorInfo* SafetensorsSet::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &it->second;
}

Result<HostTensor> SafetensorsSet::tensor(const std::string& name) const {
  const SafetensorsTensorInfo* t = find(name);
  if (t == nullptr) return invalid_input(path_, ": no tensor named ", name);
  const SafetensorsShard& shard = shards_[t->shard];
  std::optional<DType> dt = storage_dtype(t->dtype);
  if (!dt) {
    return unsupported(shard.path, ": tensor ", name, ": dtype ", t->dtype,
                       " is not supported (kvforge reads F32, F16, BF16, I32, I8)");
  }
  const uint8_t* data = shard.data.data() + t->begin;
  const auto nbytes = static_cast<int64_t>(t->end - t->begin);
  if (reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(block_bytes(*dt)) == 0) {
    Result<HostTensor> h = HostTensor::borrow(*dt, t->shape, data, nbytes, shard.keepalive);
    if (!h) return h.take_error().context(shard.path, ": tensor ", name);
    return h;
  }
  Result<HostTensor> h = HostTensor::zeros(*dt, t->shape);  // misaligned: copy rather than misread
  if (!h) return h.take_error().context(shard.path, ": tensor ", name);
  if (nbytes > 0) std::memcpy(h->raw_mut(), data, static_cast<size_t>(nbytes));
  return h;
}

Result<SafetensorsSet> parse_safetensors_bytes(std::span<const uint8_t> bytes, const std::string& name,
                                               std::shared_ptr<const void> keepalive) {
  SafetensorsSet set;
  SafetensorsBuilder::set_path(set, name);
  Status s = SafetensorsBuilder::add_shard(set, bytes, name, std::move(keepalive));
  if (!s) return s.take_error();
  SafetensorsBuilder::finish(set);
  return set;
}

Result<SafetensorsSet> open_safetensors(const std::string& path_or_dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(path_or_dir, ec)) {
    const std::string index = path_or_dir + "/model.safetensors.index.json";
    if (exists(index)) return open_index(index);
    const std::string single = path_or_dir + "/model.safetensors";
    if (exists(single)) return open_single(single);
    return invalid_input(path_or_dir, ": holds neither model.safetensors.index.json nor model.safetensors");
  }
  const std::string suffix = ".index.json";
  if (path_or_dir.size() >= suffix.size() && path_or_dir.ends_with(suffix)) return open_index(path_or_dir);
  return open_single(path_or_dir);
}

}  // namespace kvf::load
