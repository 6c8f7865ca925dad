// The key/value cache of one sequence: f32 keys (RoPE already applied) and values for every
// layer, pre-allocated to the context length so a decode step never allocates.
//
// A forward step is a transaction. begin_step(n) opens it for n new positions; each layer
// then calls append(layer) exactly once, receiving the rows for positions length() ..
// length()+n-1 to fill in place (the k and v projections write straight into them, no copy);
// commit() makes the n positions part of the cache. commit() refuses, naming the layers, when
// a layer was skipped or appended twice: a forward that forgot a layer would otherwise leave
// stale keys that only show up as slightly wrong text many tokens later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace nanoinfer {

class KvCache {
 public:
  struct Rows {
    float* k;  // [n][kv_dim]
    float* v;  // [n][kv_dim]
  };

  KvCache() = default;
  KvCache(size_t n_layers, size_t capacity, size_t kv_dim);

  size_t length() const { return length_; }      // committed positions
  size_t capacity() const { return capacity_; }  // maximum positions
  size_t n_layers() const { return n_layers_; }
  size_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return 2 * n_layers_ * capacity_ * kv_dim_ * sizeof(float); }  // K and V storage

  // Forgets every position (and any open step); keeps the storage.
  void clear();
  // Keeps the first n positions (n <= length()); for reusing a common prefix.
  void truncate(size_t n);

  // Opens a step of n positions. Throws Error if a step is already open or the positions do
  // not fit (length() + n > capacity()).
  void begin_step(size_t n);
  // The open step's rows of `layer`; counts the call so commit() can check it.
  Rows append(size_t layer);
  // Closes the step: length() grows by n. Throws Error naming every layer that was not
  // appended exactly once (the step stays open; clear() or abort_step() discards it).
  void commit();
  // Discards an open step; the committed positions are untouched.
  void abort_step();
  bool step_open() const { return step_open_; }
  size_t step_size() const { return step_n_; }

  // All rows of a layer, committed and in the open step: [capacity][kv_dim].
  const float* keys(size_t layer) const { return k_.get() + layer * capacity_ * kv_dim_; }
  const float* values(size_t layer) const { return v_.get() + layer * capacity_ * kv_dim_; }

 private:
  size_t n_layers_ = 0;
  size_t capacity_ = 0;
  size_t kv_dim_ = 0;
  size_t length_ = 0;
  // [n_layers][capacity][kv_dim], left uninitialized: only positions below length() are ever
  // read, and a large allocation's untouched pages cost no memory, so a 4096-position cache
  // holding a short conversation is resident only for the positions it used.
  std::unique_ptr<float[]> k_;
  std::unique_ptr<float[]> v_;
  bool step_open_ = false;
  size_t step_n_ = 0;
  std::vector<uint32_t> appends_;  // [n_layers]: append() calls in the open step
};

}  // namespace nanoinfer
