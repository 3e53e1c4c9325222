// BlockTable: append, release and the read/write map rows.
#include "llm/kv/block_table.h"

#include <algorithm>
#include <utility>

namespace kvf::llm::kv {

BlockTable::BlockTable(BlockTable&& o) noexcept
    : pool_(o.pool_),
      identity_(o.identity_),
      blocks_(std::exchange(o.blocks_, {})),
      tokens_(std::exchange(o.tokens_, {})),
      committed_blocks_(std::exchange(o.committed_blocks_, 0)),
      committed_hash_(std::exchange(o.committed_hash_, kRootHash)) {}

BlockTable& BlockTable::operator=(BlockTable&& o) noexcept {
  if (this == &o) return *this;
  release().ignore();
  pool_ = o.pool_;
  identity_ = o.identity_;
  blocks_ = std::exchange(o.blocks_, {});
  tokens_ = std::exchange(o.tokens_, {});
  committed_blocks_ = std::exchange(o.committed_blocks_, 0);
  committed_hash_ = std::exchange(o.committed_hash_, kRootHash);
  return *this;
}

int32_t BlockTable::blocks_needed(int64_t new_tokens) const {
  const int64_t total = num_tokens() + std::max<int64_t>(new_tokens, 0);
  const int64_t blocks = (total + kBlockTokens - 1) / kBlockTokens;
  return static_cast<int32_t>(std::max<int64_t>(blocks - static_cast<int64_t>(blocks_.size()), 0));
}

Status BlockTable::append(std::span<const int32_t> tokens) {
  const int32_t need = blocks_needed(static_cast<int64_t>(tokens.size()));
  if (need > 0) {
    Result<std::vector<int32_t>> got = pool_->allocate(need);
    if (!got) return got.take_error().context("block table: appending ", tokens.size(), " tokens to ", num_tokens());
    blocks_.insert(blocks_.end(), got->begin(), got->end());
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return {};
}

Status BlockTable::adopt_prefix(std::vector<int32_t> blocks, std::span<const int32_t> tokens, BlockHash last_hash) {
  if (!blocks_.empty() || !tokens_.empty()) return internal_error("block table: adopt_prefix on a non-empty table");
  if (tokens.size() != blocks.size() * kBlockTokens) {
    return internal_error("block table: a prefix of ", blocks.size(), " blocks with ", tokens.size(), " tokens");
  }
  committed_blocks_ = static_cast<int32_t>(blocks.size());
  committed_hash_ = last_hash;
  blocks_ = std::move(blocks);
  tokens_.assign(tokens.begin(), tokens.end());
  return {};
}

Status BlockTable::release() {
  Status first;
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    if (*it == kNoBlock) continue;
    Status s = pool_->unref(*it);
    if (!s && first.ok()) first = Status(s.take_error());  // unchecked again: the caller must look
  }
  blocks_.clear();
  tokens_.clear();
  committed_blocks_ = 0;
  committed_hash_ = kRootHash;
  return first;
}

Status BlockTable::drop_block(int32_t index) {
  if (index < 0 || index >= static_cast<int32_t>(blocks_.size())) {
    return invalid_input("block table: no block ", index, " among ", blocks_.size());
  }
  int32_t& block = blocks_[static_cast<size_t>(index)];
  if (block == kNoBlock) return {};
  Status s = pool_->unref(block);
  block = kNoBlock;
  return s;
}

int32_t BlockTable::live_blocks() const {
  return static_cast<int32_t>(std::count_if(blocks_.begin(), blocks_.end(), [](int32_t b) { return b != kNoBlock; }));
}

int32_t BlockTable::slot(int64_t pos) const {
  if (pos < 0 || pos >= static_cast<int64_t>(blocks_.size()) * kBlockTokens) return -1;
  const int32_t block = blocks_[static_cast<size_t>(pos / kBlockTokens)];
  if (block == kNoBlock) return -1;
  return block * kBlockTokens + static_cast<int32_t>(pos % kBlockTokens);
}

int64_t BlockTable::live_positions() const {
  int64_t n = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i] == kNoBlock) continue;
    const int64_t first = static_cast<int64_t>(i) * kBlockTokens;
    n += std::clamp<int64_t>(num_tokens() - first, 0, kBlockTokens);
  }
  return n;
}

Status BlockTable::fill_read_row(std::span<int32_t> row, std::span<int32_t> key_pos) const {
  if (row.size() != key_pos.size()) return internal_error("block table: a read row and its key positions differ in width");
  if (live_positions() > static_cast<int64_t>(row.size())) {
    return capacity("block table: ", live_positions(), " live positions do not fit a read row of ", row.size());
  }
  size_t c = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i] == kNoBlock) continue;
    const int64_t first = static_cast<int64_t>(i) * kBlockTokens;
    for (int64_t p = first; p < std::min<int64_t>(first + kBlockTokens, num_tokens()); ++p, ++c) {
      row[c] = blocks_[i] * kBlockTokens + static_cast<int32_t>(p - first);
      key_pos[c] = static_cast<int32_t>(p);
    }
  }
  std::fill(row.begin() + static_cast<std::ptrdiff_t>(c), row.end(), 0);
  std::fill(key_pos.begin() + static_cast<std::ptrdiff_t>(c), key_pos.end(), kNoKey);
  return {};
}

Status BlockTable::fill_write(int64_t first_pos, std::span<int32_t> out) const {
  if (first_pos < 0 || first_pos + static_cast<int64_t>(out.size()) > num_tokens()) {
    return invalid_input("block table: write positions [", first_pos, ", ", first_pos + static_cast<int64_t>(out.size()),
                         ") outside the ", num_tokens(), " tokens appended");
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = slot(first_pos + static_cast<int64_t>(i));
  return {};
}

void BlockTable::mark_committed(int32_t blocks, BlockHash last_hash) {
  committed_blocks_ = blocks;
  committed_hash_ = last_hash;
}

}  // namespace kvf::llm::kv
