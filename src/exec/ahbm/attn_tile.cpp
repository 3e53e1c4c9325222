// The shared attn_tile stage layout (attn_tile.h).
#include "exec/ahbm/attn_tile.h"

namespace kvf::ahbm {

int64_t element_bytes(DType storage) { return storage == DType::kF32 ? 4 : 2; }

Composite attn_tile(const TileWork& w, TileBuffers& b, std::optional<Stage> q_load, std::optional<Stage> state_load) {
  const int64_t tile = w.tile, r = w.rows, d = w.head_dim, row0 = w.row0;
  const int64_t bytes = w.valid * d * element_bytes(w.storage);
  const float scale = w.scale;
  const DType mm_in = w.storage;
  b.valid = w.valid;
  FlashState& st = *w.state;
  // Only the valid rows move; the DMA zero-fills the rest of the tile in SRAM.
  auto fill = [&b, tile, d](const float* src, std::vector<float>* dst) {
    return [&b, src, dst, tile, d] { load_rows(src, b.valid, tile, d, dst->data()); };
  };
  auto when = [&w](std::function<void()> f) { return w.values ? std::move(f) : std::function<void()>{}; };

  Composite c;
  c.name = w.name;
  c.stream = w.stream;
  auto add = [&c](Stage s) {
    c.stages.push_back(std::move(s));
    return static_cast<int>(c.stages.size()) - 1;
  };
  std::vector<int> qk_deps;
  if (q_load) qk_deps.push_back(add(std::move(*q_load)));
  qk_deps.push_back(add({.op = StageOp::kDma, .name = "dma_k", .bytes = bytes, .compute = when(fill(w.k, &b.k))}));
  int last = add({.op = StageOp::kMatmul, .name = "mm_qk", .macs = r * tile * d, .deps = qk_deps, .carried = w.carry_qk,
                  .compute = when([&b, q = w.q, r, tile, d, scale] { tile_scores(q, r, b.k.data(), tile, d, scale, b.s.data()); })});
  if (w.mask_rows > 0) {  // the kernel built the mask; the composite only applies it
    last = add({.op = StageOp::kVec, .name = "vec_mask", .elems = r * tile, .deps = {last},
                .compute = when([&b, r, tile, mr = w.mask_rows] { tile_mask(b.s.data(), r, tile, b.mask.data(), mr); })});
  }
  std::vector<int> softmax_deps{last};
  if (state_load) softmax_deps.push_back(add(std::move(*state_load)));
  const int softmax = add({.op = StageOp::kVec, .name = "vec_softmax", .elems = 3 * r * tile + 3 * r,
                           .exps = r * tile + r, .deps = softmax_deps, .carried = true,
                           .compute = when([&b, &st, row0, r, tile, mm_in] {
                             softmax_update(st, row0, b.s.data(), r, tile, b.alpha.data(), mm_in);
                           })});
  // No dependency inside the composite: V streams in while Q·Kᵀ and the softmax run.
  const int dma_v = add({.op = StageOp::kDma, .name = "dma_v", .bytes = bytes, .compute = when(fill(w.v, &b.v))});
  const int pv = add({.op = StageOp::kMatmul, .name = "mm_pv", .macs = r * tile * d, .deps = {softmax, dma_v},
                      .compute = when([&b, r, tile, d] { tile_pv(b.s.data(), r, b.v.data(), tile, d, b.pv.data()); })});
  add({.op = StageOp::kVec, .name = "vec_update", .elems = 2 * r * d, .deps = {pv}, .carried = true,
       .compute = when([&b, &st, row0, r] { update_output(st, row0, r, b.alpha.data(), b.pv.data()); })});
  return c;
}

}  // namespace kvf::ahbm
