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
    Status s = pool_->unref(*it);
    if (!s && first.ok()) first = Status(s.take_error());  // unchecked again: the caller must look
  }
  blocks_.clear();
  tokens_.clear();
  committed_blocks_ = 0;
  committed_hash_ = kRootHash;
  return first;
}

int32_t BlockTable::slot(int64_t pos) const {
  if (pos < 0 || pos >= static_cast<int64_t>(blocks_.size()) * kBlockTokens) return -1;
  const int32_t block = blocks_[static_cast<size_t>(pos / kBlockTokens)];
  return block * kBlockTokens + static_cast<int32_t>(pos % kBlockTokens);
}

Status BlockTable::fill_read_row(std::span<int32_t> row) const {
  if (num_tokens() > static_cast<int64_t>(row.size())) {
    return capacity("block table: ", num_tokens(), " tokens do not fit a read row of ", row.size());
  }
  for (size_t p = 0; p < row.size(); ++p) {
    row[p] = static_cast<int64_t>(p) < num_tokens() ? slot(static_cast<int64_t>(p)) : 0;
  }
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
