// .npy: magic, version 1.0, a padded Python-dict header, raw little-endian data.
#include "load/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace kvf::load {

Status write_npy_f32(const std::string& path, const Shape& shape, std::span<const float> values) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';  // data starts 64-byte aligned
  header += '\n';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return invalid_input(path, ": cannot open for writing");
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  if (!f) return invalid_input(path, ": write failed");
  return {};
}

Result<NpyArray> read_npy_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalid_input(path, ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string b = ss.str();
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0 || b[6] != 1) return invalid_input(path, ": not a version 1 .npy file");
  uint16_t len;
  std::memcpy(&len, b.data() + 8, 2);
  if (10u + len > b.size()) return invalid_input(path, ": header runs past the end of the file");
  const std::string header = b.substr(10, len);
  if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos) {
    return unsupported(path, ": only little-endian float32 C-order arrays are read");
  }
  const size_t open = header.find('('), close = header.find(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return invalid_input(path, ": no shape in header");
  NpyArray a;
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  std::string tok;
  int64_t n = 1;
  while (std::getline(dims, tok, ',')) {
    if (tok.find_first_not_of(' ') == std::string::npos) continue;
    const int64_t d = std::stoll(tok);
    if (d < 0) return invalid_input(path, ": negative dimension");
    a.shape.push_back(d);
    n *= d;
  }
  const size_t data = 10u + len;
  if (b.size() - data != static_cast<size_t>(n) * 4) return invalid_input(path, ": data size does not match the shape");
  a.values.resize(static_cast<size_t>(n));
  std::memcpy(a.values.data(), b.data() + data, static_cast<size_t>(n) * 4);
  return a;
}

}  // namespace kvf::load
