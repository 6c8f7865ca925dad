#include "tokenizer/tokenizer_bpe.h"

#include <algorithm>
#include <bit>

namespace nanoinfer {

namespace {

// Pieces longer than this are not cached (long runs of one character are rare and unique);
// the cache is emptied when it reaches kMaxCacheEntries, which bounds its memory.
constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kMaxCacheEntries = size_t{1} << 17;

uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
}

uint64_t hash_key(uint64_t key) {
  return (key * 0x9E3779B97F4A7C15ull) ^ (key >> 29);
}

}  // namespace

BpeModel::BpeModel(const std::array<int32_t, 256>& byte_ids, const std::vector<BpeMerge>& merges, bool ignore_merges,
                   StringTable whole_tokens)
    : byte_ids_(byte_ids), ignore_merges_(ignore_merges), whole_tokens_(std::move(whole_tokens)) {
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, merges.size() * 2));
  merges_.assign(capacity, MergeSlot{kEmpty, 0, 0});
  mask_ = capacity - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const uint64_t key = pair_key(merges[rank].left, merges[rank].right);
    for (uint64_t h = hash_key(key) & mask_;; h = (h + 1) & mask_) {
      if (merges_[h].key == key) break;  // a repeated merge keeps its first (lowest) rank
      if (merges_[h].key == kEmpty) {
        merges_[h] = {key, static_cast<uint32_t>(rank), merges[rank].merged};
        break;
      }
    }
  }
}

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t h = hash_key(key) & mask_;; h = (h + 1) & mask_) {
    const MergeSlot& slot = merges_[h];
    if (slot.key == key) return &slot;
    if (slot.key == kEmpty) return nullptr;
  }
}

void BpeModel::merge_uncached(std::string_view piece, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const uint32_t* id = whole_tokens_.find(piece)) {
      out.push_back(static_cast<int32_t>(*id));
      return;
    }
  }
  // Symbols form a doubly linked list over the piece's byte positions; a merged symbol
  // keeps the position of its left part, so position order is left-to-right order.
  struct Symbol {
    int32_t id;
    int32_t prev;  // -1 at the start
    int32_t next;  // -1 at the end
  };
  // A candidate merge of the symbol at `pos` with its successor, valid while both still
  // hold the ids recorded here (a symbol's id only ever changes by growing into a longer
  // token, so it never returns to an old value).
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;  // min-heap on (rank, pos) via std::greater
  symbols.resize(piece.size());
  const auto n = static_cast<int32_t>(piece.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  heap.clear();
  auto consider = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const MergeSlot* m = find_merge(symbols[pos].id, symbols[next].id)) {
      heap.push_back({m->rank, pos, symbols[pos].id, symbols[next].id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[c.pos];
    if (left.id != c.left || left.next < 0) continue;  // stale
    Symbol& right = symbols[left.next];
    if (right.id != c.right) continue;  // stale
    left.id = find_merge(c.left, c.right)->merged;
    right.id = -1;  // dead
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    merge_uncached(piece, out);
    return;
  }
  {
    std::lock_guard lock(cache_mutex_);
    if (const uint32_t* at = cache_.find(piece)) {
      const int32_t* cached = cache_ids_.data() + *at;
      out.insert(out.end(), cached + 1, cached + 1 + cached[0]);
      return;
    }
  }
  const size_t first = out.size();
  merge_uncached(piece, out);
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) {
    cache_.clear();
    cache_ids_.clear();
  }
  if (cache_.insert(piece, static_cast<uint32_t>(cache_ids_.size()))) {
    cache_ids_.push_back(static_cast<int32_t>(out.size() - first));
    cache_ids_.insert(cache_ids_.end(), out.begin() + first, out.end());
  }
}

size_t BpeModel::cache_entries() const {
  std::lock_guard lock(cache_mutex_);
  return cache_.size();
}

void BpeModel::clear_cache() const {
  std::lock_guard lock(cache_mutex_);
  cache_.clear();
  cache_ids_.clear();
}

}  // namespace nanoinfer
