// Loading, writing and checking the AHBM configuration (config.h). One table names every
// field by its dotted JSON path, so reading, writing and the unknown-key check agree.
// JSON without exceptions: parse(..., false) and explicit type checks.
#include "exec/ahbm/config.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>
#include <variant>
#include <vector>

namespace kvf::ahbm {
namespace {

using json = nlohmann::json;

struct Field {
  const char* path;  // dotted, as in default_config.json
  std::variant<double*, int64_t*, int*, bool*> at;
};

std::vector<Field> fields(AhbmConfig& c) {
  HwConfig& hw = c.hw;
  return {
      {"clock_ghz", &hw.clock_ghz},
      {"cubes", &hw.cubes},
      {"pe_mesh.rows", &hw.mesh_rows},
      {"pe_mesh.cols", &hw.mesh_cols},
      {"pe.sram_bytes", &hw.sram_bytes},
      {"pe.issue_cycles", &hw.issue_cycles},
      {"pe.dma.cube_bandwidth_gb_s", &hw.dma.cube_bandwidth_gb_s},
      {"pe.dma.latency_cycles", &hw.dma.latency_cycles},
      {"pe.mm.bf16_macs_per_cycle", &hw.mm.bf16_macs_per_cycle},
      {"pe.mm.latency_cycles", &hw.mm.latency_cycles},
      {"pe.vec.lanes", &hw.vec.lanes},
      {"pe.vec.exp_per_cycle", &hw.vec.exp_per_cycle},
      {"pe.ipcq.depth", &hw.ipcq.depth},
      {"pe.ipcq.entry_bytes", &hw.ipcq.entry_bytes},
      {"pe.ipcq.hop_latency_cycles", &hw.ipcq.hop_latency_cycles},
      {"pe.ipcq.bytes_per_cycle", &hw.ipcq.bytes_per_cycle},
      {"pe.ipcq.poll_cycles", &hw.ipcq.poll_cycles},
      {"pe.ipcq.spin_cycles", &hw.ipcq.spin_cycles},
      {"pe.ipcq.max_spin_polls", &hw.ipcq.max_spin_polls},
      {"kernel.tile", &c.kernel.tile},
      {"kernel.prefetch", &c.kernel.prefetch},
      {"kernel.gqa_batch", &c.kernel.gqa_batch},
      {"kernel.q_block", &c.kernel.q_block},
  };
}

json::json_pointer pointer(const std::string& dotted) {
  std::string p = "/" + dotted;
  for (char& ch : p) ch = ch == '.' ? '/' : ch;
  return json::json_pointer(p);
}

// Every leaf of v under its dotted path.
void leaves(const json& v, const std::string& path, std::vector<std::pair<std::string, const json*>>& out) {
  if (!v.is_object()) {
    out.emplace_back(path, &v);
    return;
  }
  for (const auto& [key, child] : v.items()) leaves(child, path.empty() ? key : path + "." + key, out);
}

Status read(const json& v, const std::string& at, const Field& f) {
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) return invalid_input(at, ": expected true or false");
        } else if constexpr (std::is_integral_v<T>) {
          if (!v.is_number_integer()) return invalid_input(at, ": expected an integer");
        } else if (!v.is_number()) {
          return invalid_input(at, ": expected a number");
        }
        *p = v.get<T>();
        return {};
      },
      f.at);
}

Status positive(bool ok, const char* what) {
  if (!ok) return invalid_input("ahbm config: ", what, " must be positive");
  return {};
}

}  // namespace

Status validate(const AhbmConfig& c) {
  const HwConfig& hw = c.hw;
  const std::pair<bool, const char*> checks[] = {
      {hw.clock_ghz > 0, "clock_ghz"},
      {hw.cubes > 0, "cubes"},
      {hw.mesh_rows > 0 && hw.mesh_cols > 0, "pe_mesh.rows and pe_mesh.cols"},
      {hw.sram_bytes > 0, "pe.sram_bytes"},
      {hw.issue_cycles >= 0, "pe.issue_cycles (or zero)"},
      {hw.dma.cube_bandwidth_gb_s > 0, "pe.dma.cube_bandwidth_gb_s"},
      {hw.dma.latency_cycles >= 0, "pe.dma.latency_cycles (or zero)"},
      {hw.mm.bf16_macs_per_cycle > 0, "pe.mm.bf16_macs_per_cycle"},
      {hw.mm.latency_cycles >= 0, "pe.mm.latency_cycles (or zero)"},
      {hw.vec.lanes > 0, "pe.vec.lanes"},
      {hw.vec.exp_per_cycle > 0, "pe.vec.exp_per_cycle"},
      {hw.ipcq.depth > 0, "pe.ipcq.depth"},
      {hw.ipcq.entry_bytes > 0, "pe.ipcq.entry_bytes"},
      {hw.ipcq.hop_latency_cycles >= 0, "pe.ipcq.hop_latency_cycles (or zero)"},
      {hw.ipcq.bytes_per_cycle > 0, "pe.ipcq.bytes_per_cycle"},
      {hw.ipcq.poll_cycles > 0, "pe.ipcq.poll_cycles"},
      {hw.ipcq.spin_cycles > 0, "pe.ipcq.spin_cycles"},
      {hw.ipcq.max_spin_polls > 0, "pe.ipcq.max_spin_polls"},
      {c.kernel.tile > 0, "kernel.tile"},
      {c.kernel.prefetch > 0, "kernel.prefetch"},
      {c.kernel.q_block > 0, "kernel.q_block"},
  };
  for (const auto& [ok, what] : checks) {
    Status s = positive(ok, what);
    if (!s) return s;
  }
  return {};
}

Result<AhbmConfig> parse_config(const std::string& json_text, const std::string& origin) {
  const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return invalid_input(origin, ": not valid JSON");
  if (!root.is_object()) return invalid_input(origin, ": expected an object");
  AhbmConfig c;
  const std::vector<Field> table = fields(c);
  std::vector<std::pair<std::string, const json*>> given;
  leaves(root, "", given);
  for (const auto& leaf : given) {
    const std::string& path = leaf.first;  // a named reference: clang 14 cannot capture a binding
    const std::string at = origin + "." + path;
    auto f = std::find_if(table.begin(), table.end(), [&](const Field& x) { return path == x.path; });
    if (f == table.end()) return invalid_input(at, ": unknown key");
    Status s = read(*leaf.second, at, *f);
    if (!s) return s.take_error();
  }
  Status s = validate(c);
  if (!s) return s.take_error().context(origin);
  return c;
}

Result<AhbmConfig> load_config(const std::string& path) {
  std::ifstream f(path);
  if (!f) return invalid_input(path, ": cannot open");
  std::stringstream text;
  text << f.rdbuf();
  return parse_config(text.str(), path);
}

std::string config_json(const AhbmConfig& c) {
  AhbmConfig copy = c;
  json j = json::object();
  for (const Field& f : fields(copy)) std::visit([&](auto* p) { j[pointer(f.path)] = *p; }, f.at);
  return j.dump();
}

}  // namespace kvf::ahbm
