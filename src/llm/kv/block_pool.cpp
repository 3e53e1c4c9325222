// BlockPool: refcounts, the intrusive LRU free queue and the hash map.
#include "llm/kv/block_pool.h"

#include <algorithm>

namespace kvf::llm::kv {

BlockPool::BlockPool(int32_t num_blocks)
    : blocks_(static_cast<size_t>(std::clamp(num_blocks, 0, kMaxBlocks))) {
  for (int32_t b = 0; b < this->num_blocks(); ++b) push_back(b);
  // At most one entry per block, so the table never rehashes after this.
  by_hash_.reserve(blocks_.size());
}

Result<std::vector<int32_t>> BlockPool::allocate(int32_t n) {
  if (n < 0) return invalid_input("block pool: allocate(", n, "): a negative block count");
  if (n > free_count_) {
    return capacity("block pool: need ", n, " blocks, ", free_count_, " free of ", num_blocks());
  }
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = head_;
    remove(b);
    Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.cached) {
      drop_hash(b);
      ++evictions_;
    }
    ++blk.generation;
    blk.ref_count = 1;
    out.push_back(b);
  }
  return out;
}

Status BlockPool::ref(int32_t block) {
  if (Status s = check_id(block, "ref"); !s) return s;
  Block& blk = blocks_[static_cast<size_t>(block)];
  if (blk.ref_count == 0) remove(block);
  ++blk.ref_count;
  return {};
}

Status BlockPool::unref(int32_t block) {
  if (Status s = check_id(block, "unref"); !s) return s;
  Block& blk = blocks_[static_cast<size_t>(block)];
  if (blk.ref_count == 0) return internal_error("block pool: unref of free block ", block);
  if (--blk.ref_count == 0) push_back(block);
  return {};
}

std::vector<int32_t> BlockPool::free_queue() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(free_count_));
  for (int32_t b = head_; b != kNoBlock; b = blocks_[static_cast<size_t>(b)].next) out.push_back(b);
  return out;
}

Status BlockPool::set_hash(int32_t block, BlockHash hash) {
  if (Status s = check_id(block, "set_hash"); !s) return s;
  Block& blk = blocks_[static_cast<size_t>(block)];
  if (blk.cached) return internal_error("block pool: block ", block, " already has a hash");
  if (!by_hash_.emplace(hash, block).second) {
    return internal_error("block pool: hash ", hash, " already names block ", lookup(hash));
  }
  blk.cached = true;
  blk.hash = hash;
  return {};
}

void BlockPool::drop_hash(int32_t block) {
  Block& blk = blocks_[static_cast<size_t>(block)];
  if (!blk.cached) return;
  by_hash_.erase(blk.hash);
  blk.cached = false;
}

int32_t BlockPool::lookup(BlockHash hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? kNoBlock : it->second;
}

Status BlockPool::check_id(int32_t block, const char* op) const {
  if (block < 0 || block >= num_blocks()) {
    return internal_error("block pool: ", op, "(", block, ") outside [0, ", num_blocks(), ")");
  }
  return {};
}

void BlockPool::push_back(int32_t block) {
  Block& blk = blocks_[static_cast<size_t>(block)];
  blk.prev = tail_;
  blk.next = kNoBlock;
  if (tail_ == kNoBlock) head_ = block;
  else blocks_[static_cast<size_t>(tail_)].next = block;
  tail_ = block;
  ++free_count_;
}

void BlockPool::remove(int32_t block) {
  Block& blk = blocks_[static_cast<size_t>(block)];
  if (blk.prev == kNoBlock) head_ = blk.next;
  else blocks_[static_cast<size_t>(blk.prev)].next = blk.next;
  if (blk.next == kNoBlock) tail_ = blk.prev;
  else blocks_[static_cast<size_t>(blk.next)].prev = blk.prev;
  blk.prev = blk.next = kNoBlock;
  --free_count_;
}

}  // namespace kvf::llm::kv
