// The AHBM hardware model's parameters (a chip of CUBEs whose logic dies hold PEs) and the
// attention kernel's tuning knobs. Built-in defaults equal default_config.json; every number
// is argued in docs/ahbm.md. Timing only: numerics do not depend on anything here but tile.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace kvf::ahbm {

using Cycle = int64_t;  // one clock for the whole chip

struct DmaConfig {
  double cube_bandwidth_gb_s = 1024;  // one HBM3E-class stack; shared evenly by its PEs
  Cycle latency_cycles = 100;         // DRAM row access + logic-die NoC, ~100 ns at 1 GHz
};

struct MmConfig {
  int64_t bf16_macs_per_cycle = 1024;  // a 32x32 MAC array per PE
  Cycle latency_cycles = 8;            // pipeline drain after the last operand enters
};

struct VecConfig {
  int64_t lanes = 64;          // fp32 elementwise ops (add, mul, max, compare) per cycle
  int64_t exp_per_cycle = 16;  // exp is a multi-cycle special function: a quarter of the lanes
};

struct IpcqConfig {
  int depth = 4;                  // entries per inbound queue (one queue per mesh direction)
  int64_t entry_bytes = 8192;     // one entry holds a whole (m, l, O) partial of G rows
  Cycle hop_latency_cycles = 20;  // router + wire between neighbouring PEs
  int64_t bytes_per_cycle = 64;   // link width per direction
  Cycle poll_cycles = 4;          // the kernel reading a queue's occupancy register
  Cycle spin_cycles = 16;         // spin_short(): the wait after a miss with nothing to issue
  int64_t max_spin_polls = 1 << 20;  // consecutive misses before the kernel is declared stuck
};

struct HwConfig {
  double clock_ghz = 1.0;
  int cubes = 8;                    // one per KV head of Llama3-70B
  int mesh_rows = 2, mesh_cols = 4;  // PEs per CUBE, as a 2-D mesh
  int64_t sram_bytes = 512 * 1024;   // per PE
  Cycle issue_cycles = 8;            // the PE's scalar core building and enqueueing a composite
  DmaConfig dma;
  MmConfig mm;
  VecConfig vec;
  IpcqConfig ipcq;

  int pes_per_cube() const { return mesh_rows * mesh_cols; }
  // The DMA engine's share of its cube's bandwidth, in bytes per cycle.
  double dma_bytes_per_cycle() const { return dma.cube_bandwidth_gb_s / clock_ghz / pes_per_cube(); }
};

struct KernelConfig {
  int64_t tile = 128;     // KV tokens per composite
  int prefetch = 2;       // composites in flight per PE (ADR §9: >= 2)
  bool gqa_batch = true;  // the G query rows of a KV head share each K/V tile load (ADR §5.2)
  int64_t q_block = 4;    // prefill: query tokens per block; G * q_block rows share each tile (ADR §5.4)
};

struct AhbmConfig {
  HwConfig hw;
  KernelConfig kernel;
};

// Rejects values that would make the model meaningless (zero rates, empty mesh...).
Status validate(const AhbmConfig& c);
// Reads a JSON file shaped like default_config.json; keys it leaves out keep their
// defaults, unknown keys are an error (they are typos, not extensions).
Result<AhbmConfig> load_config(const std::string& path);
Result<AhbmConfig> parse_config(const std::string& json_text, const std::string& origin);
// Every field, shaped like default_config.json (one line): for reports and comparisons.
std::string config_json(const AhbmConfig& c);

}  // namespace kvf::ahbm
