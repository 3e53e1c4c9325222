// The kernels the CUDA step executor replays, one per IR op (plain C++: no CUDA headers).
// Each has the meaning its op has in docs/ir.md and eval/ (the enums below name the IR's ops
// without including the IR, whose headers are C++20); the executor resolves shapes,
// strides and pointers once at bind time and each launch only enqueues work on `stream`.
// Nothing here synchronizes: a data-dependent failure (a gather index outside its table, an
// update past its axis) is recorded in the device's error record (step/device.h) and the
// failing launch writes nothing; the executor reads the record when the step ends.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "exec/attention_args.h"
#include "plan/linear_kernel.h"

namespace kvf::exec {
struct RowDraw;  // exec/row_draw.h
struct LogitEdit;
}  // namespace kvf::exec

namespace kvf::exec::cuda::step {

inline constexpr int kMaxRank = 8;

enum class UnaryOp : uint8_t { kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kErf, kAbs, kSin, kCos, kRecip };
enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kMax, kMin, kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr };
enum class GluAct : uint8_t { kSilu, kGeluTanh, kGeluErf };

// An output-shaped walk: the output's shape and, per operand, the element stride of each
// output axis (0 on broadcast axes).
struct Walk {
  int rank = 1;
  int64_t shape[kMaxRank] = {1};
  int64_t stride[3][kMaxRank] = {};
  int64_t numel = 1;
};

// What failed inside a step, kept for the first failure: the code, the eqn and one value.
enum class DeviceFault : int32_t {
  kNone = 0,
  kGatherIndex,      // value: the index
  kUpdateOverflow,   // value: the start
  kScatterSlot,      // value: the slot
  kScatterTwice,     // value: the slot
  kDivideByZero,
  kCastRange,
  kValidation,       // eqn: the validation's index in the graph, value: the element
};
struct FaultRecord {
  int32_t code = 0;
  int32_t eqn = -1;
  int64_t value = 0;
};

// The tensor cores' library: a cuBLASLt handle and its workspace (the device's), and the
// scratch an executor sized for its linears' 16-bit copies (tensor_core_scratch_bytes).
struct TensorCores {
  void* handle = nullptr;  // cublasLtHandle_t; null: every linear runs on the SIMT kernels
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  void* scratch = nullptr;
  int64_t scratch_bytes = 0;
  // The batched-decode linears' tile counters (gemm_rows_scratch): zero between launches.
  unsigned* counters = nullptr;
  int64_t counter_count = 0;
};

struct Launch {
  void* stream = nullptr;        // cudaStream_t
  FaultRecord* fault = nullptr;  // device memory
  int eqn = -1;                  // recorded with a fault
  TensorCores tc;
};

// ---- pointwise (pointwise.cu) ----
void unary(UnaryOp op, DType dt, const void* x, void* out, int64_t n, const Launch& l);
// Arithmetic (f32, i32), compare (f32, i32, pred -> pred), and/or (pred).
void binary(BinaryOp op, DType dt, const void* a, const void* b, void* out, const Walk& w,
            const Launch& l);
void select(int elem_bytes, const void* pred, const void* a, const void* b, void* out, const Walk& w, const Launch& l);
// f32/i32/pred/f16/bf16/q8_0/q4_0 -> f32; f32/i32/pred -> f32/i32/pred; f32 -> f16/bf16.
void cast(DType from, DType to, const void* x, void* out, int64_t n, const Launch& l);
void iota(DType dt, int64_t inner, int64_t extent, void* out, int64_t n, const Launch& l);
// out16 (when not null): out rounded to 16 bits as well (bf16 where out16_bf16, else f16).
void glu(GluAct act, const float* gate, const float* up, float* out, int64_t n, const Launch& l, void* out16 = nullptr,
         bool out16_bf16 = false);
// x [rows, d], row r at position (r / every) % t_len of cos/sin [t_len, rotary/2]
// (ir::rope_positions).
struct RopeTask {
  const float* x = nullptr;
  const float* cos = nullptr;
  const float* sin = nullptr;
  float* out = nullptr;
  int64_t rows = 0, d = 0, t_len = 1, every = 1, rotary = 0;
  bool interleaved = false;
};
void rope(const RopeTask& r, const Launch& l);

// One op of a chain of small elementwise ops: unary (f32, i32), binary (arithmetic, compare,
// and/or; through the walk) or a cast between f32, i32 and pred; w.numel elements.
enum class ChainKind : uint8_t { kUnary, kBinary, kCast };
struct ChainTask {
  ChainKind kind = ChainKind::kUnary;
  uint8_t op = 0;  // UnaryOp or BinaryOp
  DType dt = DType::kF32;  // the operands'
  DType to = DType::kF32;  // a cast's
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  Walk w;
  int eqn = -1;
};
inline constexpr int64_t kChainElements = 1024;  // the most elements of a task
// tasks[0..n) (device memory) in order in one block, each seeing what the ones before it
// wrote, as a programmatic dependent: a step's position and length arithmetic in one launch
// instead of one launch an op.
void pointwise_chain(const ChainTask* tasks, int n, const Launch& l);
// A false element of witness (pred [n]) is the step's fault (kValidation, `validation` in
// the record's eqn): the state writers after it write nothing.
void check_witness(const void* witness, int64_t n, int validation, const Launch& l);

// ---- data movement (layout.cu) ----
// out[i] = src[base + sum_a idx_a(i) * w.stride[0][a]] for every element of w's shape,
// written at dst_base + sum_a idx_a(i) * w.stride[1][a].
void strided_copy(int elem_bytes, const void* src, int64_t src_base, void* dst, int64_t dst_base, const Walk& w,
                  const Launch& l);
// table [rows, row] in its stored dtype (f32/i32/pred/f16/bf16/q8_0/q4_0), idx i32 [n]; out
// [n, row] in `out_dt` (the table's dtype, or f32 from a stored float type).
void gather(DType table_dt, const void* table, int64_t rows, int64_t row, const int32_t* idx, int64_t n,
            DType out_dt, void* out, const Launch& l);
// out (aliasing base or a copy of it) [extent along axis]: update placed at *start.
void update_slice(int elem_bytes, const void* upd, void* out, int64_t outer, int64_t extent, int64_t n,
                  int64_t inner, const int32_t* start, const Launch& l);
// The same with an f32 update rounded to f16 or bf16 (`to`) as it is written: a cast into a
// half-precision cache and the write in one launch.
void update_slice_rounded(DType to, const float* upd, void* out, int64_t outer, int64_t extent, int64_t n,
                          int64_t inner, const int32_t* start, const Launch& l);
// out (aliasing base or a copy of it) [rows, row]: row idx[i] = upd[i], idx -1 writes nothing.
// With `check`, every slot is checked (in range, not written twice) before any row is
// written; without, an earlier launch of the step checked the same slots.
void scatter(int elem_bytes, const int32_t* idx, int64_t m, const void* upd, void* out, int64_t rows, int64_t row,
             bool check, const Launch& l);
// The same with an f32 update rounded to f16 or bf16 (`to`) as it is written.
void scatter_rounded(DType to, const int32_t* idx, int64_t m, const float* upd, void* out, int64_t rows, int64_t row,
                     bool check, const Launch& l);

// ---- small ops in one launch (pack.cu) ----
// A decode step's ropes and cache writes are a few hundred elements each: a launch costs
// more than their work. A pack runs up to kPackTasks of them, mutually independent, in one
// launch, each task over its own blocks. A rope whose only reader is a cache write can
// write its rows straight into the cache (kRopeIntoSlice, kRopeIntoScatter). A paged step's
// pool writes join a pack once an earlier launch of the step has checked their slots.
inline constexpr int kPackTasks = 4;
enum class PackKind : int32_t { kRope, kSlice, kRopeIntoSlice, kScatter, kRopeIntoScatter };
struct SliceTask {  // update_slice()'s (elem_bytes 4 or 2) or update_slice_rounded()'s (f32 upd, `to` f16/bf16)
  DType to = DType::kF32;  // the cache's type
  bool rounded = false;    // an f32 update into a half cache
  const void* upd = nullptr;
  void* out = nullptr;
  int64_t outer = 1, extent = 1, n = 1, inner = 1;
  const int32_t* start = nullptr;
  int eqn = -1;            // recorded with a fault
};
struct ScatterTask {  // scatter()'s or scatter_rounded()'s, in place, without the slot check
  DType to = DType::kF32;  // the pool's type
  bool rounded = false;    // an f32 update into a half pool
  const void* upd = nullptr;
  void* out = nullptr;
  const int32_t* idx = nullptr;  // [m] pool rows, -1 writes nothing
  int64_t m = 0, row = 0;
};
struct PackTask {
  PackKind kind = PackKind::kRope;
  RopeTask rope;        // kRope, kRopeIntoSlice, kRopeIntoScatter
  SliceTask slice;      // kSlice, kRopeIntoSlice (its upd is the rope's output, never written)
  ScatterTask scatter;  // kScatter, kRopeIntoScatter (likewise)
};
struct Pack {
  int tasks = 0;
  PackTask task[kPackTasks];
};
void run_pack(const Pack& p, const Launch& l);

// ---- reductions and rows (rows.cu) ----
// x viewed as [outer, red, inner] after the executor has moved the reduced axes together;
// general axes go through a transposing copy first.
void reduce(bool is_max, DType dt, const void* x, void* out, int64_t outer, int64_t red, int64_t inner,
            const Launch& l);
void rmsnorm(const float* x, const float* w, float* out, int64_t rows, int64_t d, double eps, bool unit_offset,
             const Launch& l);
// The same norm with each result rounded to f16 or bf16 (`half`): a tensor-core linear's x.
void rmsnorm_to_half(const float* x, const float* w, void* out, DType half, int64_t rows, int64_t d, double eps,
                     bool unit_offset, const Launch& l);
void softmax(const float* x, float* out, int64_t rows, int64_t d, const Launch& l);
// out[r] = exec::row_argmax of row r of x [rows, d]: the first largest value, a NaN never
// winning except at 0 (d < 2^31).
void row_argmax(const float* x, int64_t rows, int64_t d, int32_t* out, const Launch& l);
// out[r] = the token draws[r] draws from row r of logits [rows, d] (exec/row_draw.h: the
// meaning, and the host's draw_row it matches), the row's edits applied to it in place
// first; `edits` is the step's edit list the draws index. One block a row (d < 2^31).
void draw_tokens(float* logits, int64_t rows, int64_t d, const RowDraw* draws, const LogitEdit* edits, int32_t* out,
                 const Launch& l);

// ---- matrix products (linear.cu, tensor_cores.cu) ----
// out [m, n] = x [m, k] . w[n, k]^T (+ bias [n]); w in its stored dtype (f32/f16/bf16/q8_0/q4_0).
// f32 accumulation everywhere; plan::linear_kernel picks the kernel by the rows of x: up to
// plan::kGemvMaxRows, the decode kernels, bound by the weight bytes (and with the tensor
// cores allowed, gemm_rows and gemm_stream for a batched decode's 16-bit weights); from
// plan::kTensorCoreRows rows, 16-bit and quantized weights go to the tensor cores (cuBLASLt):
// x is rounded to the weights' type (bf16 for bf16, f16 otherwise; q8_0/q4_0 weights are
// widened to f16 first, each d * q rounded to
// f16), as llama.cpp's CUDA backend does. f32 weights: f32 SIMT tiles at any size.
void linear(const float* x, int64_t m, int64_t k, DType w_dt, const void* w, int64_t n, const float* bias,
            float* out, const Launch& l);
// Up to three linears over one x [m, k] (one weight dtype) in one launch, optionally behind
// an RMSNorm of x. With glu, parts 0
// and 1 are gate and up and act(gate) * up goes to glu_out; with a residual (one part),
// out = x . w^T + bias + residual. Small m writes only the final values; larger m writes
// every part's out and finishes with the glu or add.
struct LinearPart {
  const void* w = nullptr;
  const float* bias = nullptr;
  int64_t n = 0;
  float* out = nullptr;
};
struct LinearGroup {
  // An RMSNorm of x in front (norm_w non-null): the parts read x * rsqrt(mean(x²) + eps) *
  // (norm_w or 1 + norm_w). Small m normalizes on the fly; larger m writes norm_out first.
  const float* norm_w = nullptr;
  double norm_eps = 0.0;
  bool norm_unit_offset = false;
  float* norm_out = nullptr;
  // With norm_w, for up to 8 rows: each row's 1 / rms computed ahead (null: every block of
  // the decode kernels computes it over x).
  const float* norm_inv = nullptr;
  int parts = 1;
  LinearPart part[3];
  bool glu = false;
  GluAct act = GluAct::kSilu;
  float* glu_out = nullptr;
  // The glu's output also stored rounded to 16 bits ([m, n]; bf16 where glu_out16_bf16, else
  // f16) by every kernel, for the group behind to read as its x16.
  void* glu_out16 = nullptr;
  bool glu_out16_bf16 = false;
  // x already rounded to the weights' 16-bit type ([m, k], the group in front's glu_out16; no
  // norm): the kernels that multiply a 16-bit x read it instead of rounding x themselves.
  const void* x16 = nullptr;
  const float* residual = nullptr;
  float* residual_out = nullptr;
  // The small ops that follow the group and read only its parts' outputs (a decode step's q
  // rope, k rope into the cache, v into the cache). With one row of x on the one-row kernel,
  // each task whose reads are element by element (a rope's pairs adjacent columns) runs in
  // its epilogue, saving the pack's launch and its wait; otherwise run_pack runs them after
  // the group. `fault` is the step's record (the cache write's bounds check).
  Pack then;
  FaultRecord* fault = nullptr;
};
// Whether the one-row kernel's epilogue can run g.then: tasks that each read one part's
// output whole, ropes with interleaved pairs, no glu or residual add, parts of even width.
bool pack_in_epilogue(const LinearGroup& g);
void linear_group(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);
// Whether a group in front hands g its x already rounded (LinearGroup::glu_out16 -> x16):
// plan::takes_rounded_x of the kernel linear_group picks first for g.
bool hands_rounded_x(int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);
// The decode kernels of linear_group (up to plan::kGemvMaxRows rows of x), each false,
// launching nothing, for weights of another type or a group it does not take:
//   - one row on the one-row kernel (gemv_bulk.cuh), g.then in its epilogue, over f16/bf16
//     (gemv16.cu) or q8_0/q4_0 weights (gemv_quantized.cu);
//   - 1 or 2 rows on the register kernel (gemv16.cuh), f16/bf16 weights;
//   - up to 8 rows on the bulk-copy kernel (gemv_bulk.cuh), rows of whole 16-byte vectors.
bool gemv16_one_row(const float* x, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);
bool gemv_quantized_one_row(const float* x, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);
bool gemv16_register(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);
bool gemv16_bulk(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);
bool gemv_quantized_bulk(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);

// The same group over plan::kGemmRowsMin..kGemmRowsMax rows of x and 16-bit weights, on the
// tensor cores by gemm_rows.cu's own kernel (a batched decode: bound by the weight bytes, as
// the gemv kernels are), from x rounded to the weights' type with the norm applied; false,
// launching nothing, where it does not fit or the scratch is short.
struct GemmRowsScratch {
  int64_t bytes = 0;     // of TensorCores::scratch
  int64_t counters = 0;  // of TensorCores::counters
};
bool gemm_rows_fits(int64_t m, int64_t k, DType w_dt, const LinearGroup& g);
// x [m, k] rounded to `half` into out, the group's norm applied as it is rounded: what the
// batched-decode kernels multiply.
void round_group_x(const float* x, int64_t m, int64_t k, DType half, const LinearGroup& g, void* out, const Launch& l);
GemmRowsScratch gemm_rows_scratch(int64_t m, int64_t k, DType w_dt, const LinearGroup& g);
bool linear_group_rows(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);
// The same past gemm_rows' reach, plan::kGemmStreamMin..kGemmStreamMax rows, on a Hopper
// device (sm_90) by gemm_stream_sm90a.cu's kernel: weight tiles and x streamed into shared
// memory by TMA and multiplied by wgmma; false, launching nothing, where it does not fit,
// the device is not sm_90 or the scratch is short.
bool gemm_stream_fits(int64_t m, int64_t k, DType w_dt, const LinearGroup& g);
GemmRowsScratch gemm_stream_scratch(int64_t m, int64_t k, DType w_dt, const LinearGroup& g);
bool linear_group_stream(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);

bool tensor_core_fits(int64_t m, int64_t k, DType w_dt);
// The scratch a tensor-core linear of x [m, k] by w [n, k] needs (0 when it runs elsewhere).
int64_t tensor_core_scratch_bytes(int64_t m, int64_t k, int64_t n, DType w_dt);
// out = x . w^T (+ bias) on the tensor cores; false when cuBLASLt has no algorithm for the
// shape or refuses the product, and the caller runs another kernel.
bool linear_tensor_cores(const float* x, int64_t m, int64_t k, DType w_dt, const void* w, int64_t n,
                         const float* bias, float* out, const Launch& l);
// A whole linear group on the tensor cores: x rounded to 16 bits once for every part, with
// the group's norm applied as it is rounded; the residual added by cuBLASLt (beta 1), the
// glu after the products. False, launching nothing, where one product has no algorithm.
bool linear_group_tensor_cores(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l);
// The device's cuBLASLt handle; null when the library cannot start (the SIMT kernels run).
void* tensor_cores_open();
void tensor_cores_close(void* handle) noexcept;

// Batched f32 [.., m, k] x [.., k, n]: batch offsets from w (2 operands, in matrices).
void matmul(const float* a, const float* b, float* out, int64_t m, int64_t k, int64_t n, const Walk& batch,
            const Launch& l);

// ---- routed experts (moe.cu): the Moe eqn (docs/ir.md), on the schedule plan/moe_schedule.h
// names. Only the picked experts' weights are read, and the host never learns which they are.
struct MoeArgs {
  const float* x = nullptr;        // [rows, dim]
  const float* weights = nullptr;  // [rows, experts]: 0 where a row did not pick the expert
  int64_t rows = 0, dim = 0, ffn = 0, experts = 0;
  // Device arrays of `experts` pointers each; the gate and up weights [ffn, dim] share one
  // stored type, the down weights [dim, ffn] another (f32/f16/bf16/q8_0/q4_0).
  const void* const* gate = nullptr;
  const void* const* up = nullptr;
  const void* const* down = nullptr;
  DType gate_dt = DType::kF32, down_dt = DType::kF32;
  GluAct act = GluAct::kSilu;
  bool gathered = false;         // else direct: rows <= 8, dim and ffn in whole 8-groups (blocks)
  int64_t experts_per_pass = 0;  // gathered
  bool tensor_cores = false;     // gathered: 16-bit products (plan::MoeRequest::tensor_cores)
  float* scratch = nullptr;      // plan::MoeRequest::scratch_floats
  float* out = nullptr;          // [rows, dim]
};
void moe(const MoeArgs& a, const Launch& l);

// ---- LoRA terms (lora.cu): the Lora eqn (docs/ir.md). result may be y.
struct LoraRows {
  const float* y = nullptr;  // [rows, out]
  const float* x = nullptr;  // [rows, in]
  int64_t rows = 0, in = 0, out = 0, rank = 0;
  DType factors = DType::kF32;  // a's and b's type: f32 or f16
  const void* a = nullptr;      // [adapters, rank, in]
  const void* b = nullptr;      // [adapters, rank, out]: each adapter's B transposed
  const float* s = nullptr;  // [adapters]
  const int32_t* ids = nullptr;  // [rows]
  float* result = nullptr;   // [rows, out]
  float* scratch = nullptr;  // [rows, rank]: plan::lora_scratch_floats
};
void lora(const LoraRows& a, const Launch& l);

// ---- attention (attention_rows.cu): the fused op's full contract (exec/cpu/attention.h), on
// the operands every backend reads (exec/attention_args.h) ----
inline constexpr int64_t kAttentionRowsMaxWidth = 1024;
// `splits` > 1: the keys are split across blocks (Flash-Decoding; the count is the plan's,
// plan/attention_schedule.cpp), each split taking an equal share of a row's live keys, and
// the partials, (dv + 2) floats per query row and split, go to `workspace` before a second
// kernel merges them. `ml` non-null: each query row's softmax state as decode_attention gives
// it ([rows, 2]: m the largest score in log2 units, l the sum of 2^(s - m); (-inf, 0) for a
// row that sees no key), for merging with other partials (merge_attention_partials).
void attention_rows(const AttentionArgs& a, int splits, float* workspace, const Launch& l, float* ml = nullptr);

// ---- selected attention (selection.cu): the fused ops of docs/ir.md, as exec/cpu/ runs them ----
// indexer_scores: q [R, H, n, D], k [R, L, D] (f32 or f16), w [R, H, n] -> out [R, n, L]. A
// row's H D + H floats must fit the block's shared memory (kIndexerMaxFloats).
struct IndexerScoresRows {
  const float* q = nullptr;
  const void* k = nullptr;
  bool k_f16 = false;
  const float* w = nullptr;
  int64_t rows = 1, heads = 1, n = 1, dim = 1, keys = 0;
  float scale = 1.0f;
  float* out = nullptr;
};
inline constexpr int64_t kIndexerMaxFloats = 12 * 1024;
void indexer_scores(const IndexerScoresRows& a, const Launch& l);
// block_topk: scores [rows, blocks], pos [rows] -> out pred [rows, blocks].
struct BlockTopKRows {
  const float* scores = nullptr;
  const int32_t* pos = nullptr;
  int64_t rows = 0, blocks = 0, topk = 1, ratio = 1;
  uint8_t* out = nullptr;
};
void block_topk(const BlockTopKRows& a, const Launch& l);
// selected_attention: the attention over each query row's visible keys, listed first into
// scratch (plan::gpu_selected_attention_scratch_bytes); one block per (query row, head).
struct SelectedAttentionRows {
  AttentionArgs attn;  // dense keys need hkv == 1 (rows b Lk + t)
  const uint8_t* selected = nullptr;  // [B, Lq, blocks]
  const int32_t* pos = nullptr;       // [B * Lq]
  int64_t blocks = 0, ratio = 1;
  void* scratch = nullptr;
};
void selected_attention(const SelectedAttentionRows& a, const Launch& l);

// Context-parallel attention (kv_shard.cu): rank `rank` of `ranks`' share of each row's keys.
// Dense keys, or a map over a pool every rank holds whole: the keys are dealt by position
// under plan::KvShards (blocks of `block` positions round-robin), local_map[b, j] the rank's
// j-th key's word of map (a pool row) or, with no map, its position. A pool shared out by
// blocks (`pool`, plan::PoolShards over blocks of `block` slots): the rank's keys are the
// map's words in its blocks, local_map[b, j] the j-th one's row in the rank's share.
// local_lens[b]: how many of row b's first lens[b] keys the rank holds. local_mask: those
// keys' entries of each of the `mask_rows` rows (heads x query rows) of the row's mask; by
// position a rank's j-th key is the same key of every row, so a mask shared by the rows stays
// shared. What lies past local_lens[b] is never used (by position: 0 in the map, -inf in the
// mask; in a pool's share: rows of the share).
struct KvShardMap {
  const int32_t* map = nullptr;   // [batch, stride] or null
  const int32_t* lens = nullptr;  // [batch]
  const float* mask = nullptr;    // [mask_batch, mask_rows, stride] or null
  int32_t* local_map = nullptr;   // [batch, stride]
  int32_t* local_lens = nullptr;  // [batch]
  float* local_mask = nullptr;    // [local_mask_batch, mask_rows, stride]
  int64_t batch = 0, stride = 0, block = 16;
  int64_t mask_batch = 0;        // 0 (no mask), 1 (one for every row) or batch
  int64_t mask_rows = 1;
  int64_t local_mask_batch = 0;  // mask_batch, or batch for a pool's share of a mask
  bool pool = false;
  int rank = 0, ranks = 1;
  int32_t* tile_counts = nullptr;  // pool form's scratch: [batch, kv_shard_tiles(stride)]
};
// The pool form scans a row in tiles of kKvShardTile words side by side (at least one, which
// writes the row's count): one pass counts the rank's words of each tile, the next places
// them behind the earlier tiles' counts.
inline constexpr int64_t kKvShardTile = 2048;
inline int64_t kv_shard_tiles(int64_t stride) { return std::max<int64_t>((stride + kKvShardTile - 1) / kKvShardTile, 1); }
void kv_shard_map(const KvShardMap& a, const Launch& l);

}  // namespace kvf::exec::cuda::step
