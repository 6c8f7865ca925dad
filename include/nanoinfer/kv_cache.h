// The key/value cache of one sequence: keys (RoPE already applied) and values for every layer,
// stored as f32, bf16 or f16 (the element type: ModelOptions::kv_type, `--kv-type`).
//
// Memory: the cache reserves address space for its whole capacity when it is made and commits
// it (makes it writable, so the OS backs it) as positions are used, in chunks of
// kCommitPositions positions for every layer at once. A 32,768-position cache holding a short
// conversation costs the memory of the positions it holds: committed_bytes() counts it
// exactly. Before each commit the growth is checked against the memory the OS reports
// available (MemAvailable); a cache that cannot grow refuses the step with a one-line Error
// naming the sizes, never bad_alloc. A decode step commits nothing except every
// kCommitPositions-th position.
//
// Pages::huge (what a model's sequences use): when whole 2 MiB huge pages of a region (one
// layer's K or V) hold at most a quarter of its capacity, the regions are 2 MiB-aligned, and
// once the cache is asked for more than kHugeAfter positions they are advised to the kernel
// as transparent huge pages and committed in whole huge pages (commit_positions(): 8,192
// positions of Qwen2.5-0.5B's f16 rows instead of 256); the small pages already written are
// collapsed into huge ones then (MADV_COLLAPSE, Linux 6.1 and later; advice, like the rest). A
// decode step at depth reads every committed K/V row of every layer from memory, one KV
// head's 128 bytes out of each row per thread: on 4 KiB pages that is a TLB miss (a page
// walk, nested in a VM) for every 16 rows, and the hardware prefetcher stops at each page's
// end. The cost: memory is committed (and, once touched, backed) 2 MiB per region at a time,
// 96 MiB for Qwen2.5-0.5B's 48 regions, which the kernel zeroes before the first write (~200 ms
// in the VMs we measure on): a short prompt or chat never pays it.
//
// A forward step is a transaction. begin_step(n) opens it for n new positions; each layer
// then calls append(layer, k, v) exactly once with the step's f32 rows, which are rounded into
// the cache's type (nearest even; f32 copies); commit() makes the n positions part of the
// cache. commit() refuses, naming the layers, when a layer was skipped or appended twice: a
// forward that forgot a layer would otherwise leave stale keys that only show up as slightly
// wrong text many tokens later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "nanoinfer/dtype.h"

namespace nanoinfer {

class KvCache {
 public:
  // Positions committed at a time (for every layer, K and V).
  static constexpr size_t kCommitPositions = 256;

  // Page size of the regions (see above): small (the system's pages, commits of
  // kCommitPositions) or huge (2 MiB pages where a huge page's positions are at most a
  // quarter of the capacity; small otherwise).
  enum class Pages { small, huge };
  static constexpr size_t kHugePage = size_t{2} << 20;
  // Pages::huge: positions up to which the cache stays on small pages.
  static constexpr size_t kHugeAfter = 1024;

  KvCache() = default;
  // type: DType::F32, BF16 or F16 (anything else is refused).
  KvCache(size_t n_layers, size_t capacity, size_t kv_dim, DType type = DType::F32, Pages pages = Pages::small);
  KvCache(KvCache&& other) noexcept;
  KvCache& operator=(KvCache&& other) noexcept;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  ~KvCache();

  size_t length() const { return length_; }      // committed positions
  size_t capacity() const { return capacity_; }  // maximum positions
  size_t n_layers() const { return n_layers_; }
  size_t kv_dim() const { return kv_dim_; }
  DType type() const { return type_; }
  // K and V of every layer for one position: 2 * n_layers * kv_dim * element size.
  size_t bytes_per_position() const { return 2 * n_layers_ * kv_dim_ * dtype_size(type_); }
  size_t bytes() const { return capacity_ * bytes_per_position(); }  // at full capacity
  // Bytes made writable so far: 2 * n_layers regions, each the positions committed so far
  // (a multiple of commit_positions(), at most the capacity) times kv_dim elements, rounded up
  // to whole pages (huge pages when huge_pages()).
  size_t committed_bytes() const;
  size_t committed_positions() const { return committed_; }
  // Positions committed at a time: kCommitPositions, or with huge pages the least multiple of
  // it whose rows fill whole 2 MiB pages.
  size_t commit_positions() const { return commit_positions_; }
  // Whether the regions are on huge pages now (Pages::huge, past kHugeAfter positions), and
  // whether they will be.
  bool huge_pages() const { return page_bytes_ == kHugePage; }
  bool huge_capable() const { return huge_positions_ != 0; }

  // Forgets every position (and any open step); keeps the storage.
  void clear();
  // Keeps the first n positions (n <= length()); for reusing a common prefix.
  void truncate(size_t n);
  // Copies positions [length(), n) of `src` (a cache of the same shape and type, n <=
  // src.length()) into this one, committing memory for them; length() becomes n. For a prefix
  // both sequences share: the rows of a position depend only on the tokens up to it, so the
  // copies are bitwise what a forward pass would write. Throws Error on a shape mismatch, an
  // open step, or memory that is not available (this cache unchanged).
  void extend_from(const KvCache& src, size_t n);
  // Called by every extend_from that copied rows, after the copy, with the source and the
  // positions [from, to) copied: a tensor-parallel model tells its other ranks to copy the
  // same rows of their slices (docs/SCALING.md). Moves with the cache.
  void set_copy_listener(std::function<void(const KvCache& src, size_t from, size_t to)> listener);

  // Opens a step of n positions, committing memory for them if needed. Throws Error if a
  // step is already open, the positions do not fit (length() + n > capacity()), or the memory
  // for them is not available.
  void begin_step(size_t n);
  // Writes the open step's rows of `layer`: k, v: [n][kv_dim] f32, rounded to type(). Counts
  // the call so commit() can check it.
  void append(size_t layer, const float* k, const float* v);
  // Closes the step: length() grows by n. Throws Error naming every layer that was not
  // appended exactly once (the step stays open; clear() or abort_step() discards it).
  void commit();
  // Discards an open step; the committed positions are untouched.
  void abort_step();
  bool step_open() const { return step_open_; }
  size_t step_size() const { return step_n_; }

  // All rows of a layer, committed and in the open step: [capacity][kv_dim] elements of
  // type() (float, or bf16 / f16 bit patterns as uint16_t). Only positions below
  // length() + step_size() may be read.
  const void* keys(size_t layer) const { return region(2 * layer); }
  const void* values(size_t layer) const { return region(2 * layer + 1); }

 private:
  std::byte* region(size_t i) const { return base_ + i * region_bytes_; }
  void grow(size_t positions);
  void use_huge_pages();
  void release() noexcept;

  size_t n_layers_ = 0;
  size_t capacity_ = 0;
  size_t kv_dim_ = 0;
  DType type_ = DType::F32;
  size_t length_ = 0;
  // [2 * n_layers] regions (K of layer l is region 2l, V region 2l + 1) of region_bytes_
  // each, one reserved mapping; the first committed_ positions of each are writable.
  std::byte* base_ = nullptr;
  size_t region_bytes_ = 0;
  void* map_ = nullptr;  // the reserved mapping (base_ is map_ rounded up to a huge page when huge)
  size_t map_bytes_ = 0;
  size_t page_bytes_ = 0;  // commit granularity per region in bytes: the system's page or kHugePage
  size_t commit_positions_ = kCommitPositions;
  size_t huge_positions_ = 0;  // commit_positions_ on huge pages; 0: the cache stays on small pages
  size_t committed_ = 0;
  size_t writable_ = 0;  // bytes of each region made writable
  size_t collapse_ = 0;  // bytes of each region to collapse into huge pages at the next growth
  bool step_open_ = false;
  size_t step_n_ = 0;
  std::vector<uint32_t> appends_;  // [n_layers]: append() calls in the open step
  std::function<void(const KvCache&, size_t, size_t)> copy_listener_;
};

// The cache element types `--kv-type` accepts: "f32", "bf16", "f16".
bool is_kv_type(DType type);
const char* kv_type_name(DType type);
// nullopt for anything but the three names.
std::optional<DType> kv_type_from_name(std::string_view name);

}  // namespace nanoinfer
