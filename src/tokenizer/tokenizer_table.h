// A flat open-addressing hash map from byte strings to 32-bit values, keys stored in one
// arena. The tokenizer's two string maps (token content -> id: 151k entries looked up 450k
// times while loading merges; piece -> cached ids: one lookup per piece while encoding)
// are hot enough that std::unordered_map's node allocations and pointer chasing dominated.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer {

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xC2B2AE3D27D4EB4Full);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  }
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

class StringTable {
 public:
  StringTable() { rebuild(16); }

  const uint32_t* find(std::string_view key) const {
    const uint64_t h = hash_bytes(key);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.length == kEmpty) return nullptr;
      if (s.hash == h && s.length == key.size() && std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
        return &s.value;
      }
    }
  }

  // Inserts key -> value unless key is present; returns whether it inserted.
  bool insert(std::string_view key, uint32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) rebuild(slots_.size() * 2);
    const uint64_t h = hash_bytes(key);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.length == kEmpty) {
        s = {h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), value};
        arena_.append(key);
        ++size_;
        return true;
      }
      if (s.hash == h && s.length == key.size() && std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
        return false;
      }
    }
  }

  // Sizes the table for n keys without rebuilding on the way.
  void reserve(size_t n) {
    size_t capacity = slots_.size();
    while (capacity < 2 * n) capacity *= 2;
    if (capacity != slots_.size()) rebuild(capacity);
  }

  // Inserts or overwrites.
  void set(std::string_view key, uint32_t value) {
    if (!insert(key, value)) *const_cast<uint32_t*>(find(key)) = value;
  }

  void clear() {
    for (Slot& s : slots_) s.length = kEmpty;
    arena_.clear();
    size_ = 0;
  }
  size_t size() const { return size_; }
  size_t arena_bytes() const { return arena_.size(); }

 private:
  static constexpr uint32_t kEmpty = ~uint32_t{0};
  struct Slot {
    uint64_t hash;
    uint32_t offset;  // of the key in arena_
    uint32_t length;  // kEmpty for a free slot
    uint32_t value;
  };

  void rebuild(size_t capacity) {  // capacity: a power of two
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{0, 0, kEmpty, 0});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.length == kEmpty) continue;
      uint64_t i = s.hash & mask_;
      while (slots_[i].length != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::string arena_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace nanoinfer
