#include "plan/device_caps.h"

#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"

namespace kvf::plan {
namespace {

// sysfs writes cache sizes as "32K", "1024K" or "32M".
int64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  int64_t n = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) n = n * 10 + (s[i] - '0');
  if (i < s.size() && s[i] == 'K') n <<= 10;
  if (i < s.size() && s[i] == 'M') n <<= 20;
  return n;
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

void read_caches(DeviceCaps& caps) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = str_cat("/sys/devices/system/cpu/cpu0/cache/index", index, "/");
    const std::string level = read_line(dir + "level");
    if (level.empty()) break;
    const std::string type = read_line(dir + "type");
    const int64_t size = parse_size(read_line(dir + "size"));
    if (size <= 0) continue;
    if (level == "1" && type == "Data") caps.l1d_bytes = size;
    if (level == "2") caps.l2_bytes = size;
    if (level == "3") caps.l3_bytes = size;
  }
}

int simd_bytes() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return 64;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 32;
#endif
  return 16;
}

}  // namespace

DeviceCaps cpu_caps(int threads) {
  DeviceCaps caps;
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  caps.cores = threads > 0 ? threads : (hw > 0 ? hw : 1);
  read_caches(caps);
  caps.simd_bytes = simd_bytes();
  caps.lane_state_bytes = caps.l1d_bytes;
  return caps;
}

std::string describe(const DeviceCaps& caps) {
  const char* isa = caps.simd_bytes == 64 ? "avx512" : caps.simd_bytes == 32 ? "avx2" : "sse";
  return str_cat(caps.name, ": ", caps.cores, " threads, ", isa, ", L1d ", caps.l1d_bytes >> 10, " KiB, L2 ",
                 caps.l2_bytes >> 10, " KiB, L3 ", caps.l3_bytes >> 20, " MiB");
}

}  // namespace kvf::plan
