// Byte-pair encoding over byte-level symbols: a piece's UTF-8 bytes start as one symbol
// each and the pair with the lowest merge rank is merged until none is left; on equal rank
// the leftmost pair merges first (the reference breaks ties by position the same way).
// Results are cached per piece, since natural text repeats its words.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_table.h"

namespace nanoinfer {

struct BpeMerge {
  int32_t left;
  int32_t right;
  int32_t merged;
};

class BpeModel {
 public:
  BpeModel() = default;
  // byte_ids[b]: the id of the token for the single byte b. merges: in rank order.
  // whole_tokens: bytes -> id of every vocabulary token, used only with ignore_merges (a
  // piece that is itself a token is taken whole); may be empty otherwise.
  BpeModel(const std::array<int32_t, 256>& byte_ids, const std::vector<BpeMerge>& merges, bool ignore_merges,
           StringTable whole_tokens);
  BpeModel(BpeModel&&) = delete;  // holds a mutex; lives inside Tokenizer::Impl

  // Appends the ids for one pre-tokenized piece (non-empty bytes).
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  size_t cache_entries() const;
  void clear_cache() const;

 private:
  // Open-addressing table from a symbol pair to (rank, merged id); pairs are 64-bit keys.
  struct MergeSlot {
    uint64_t key;  // (left << 32) | right, or kEmpty
    uint32_t rank;
    int32_t merged;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  const MergeSlot* find_merge(int32_t left, int32_t right) const;
  void merge_uncached(std::string_view piece, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_ids_{};
  std::vector<MergeSlot> merges_;  // power-of-two size, at most half full
  uint64_t mask_ = 0;
  bool ignore_merges_ = false;
  StringTable whole_tokens_;

  // The cache: piece bytes -> offset in cache_ids_, where the piece's id count is followed
  // by its ids.
  mutable std::mutex cache_mutex_;
  mutable StringTable cache_;
  mutable std::vector<int32_t> cache_ids_;
};

}  // namespace nanoinfer
