#include "nanoinfer/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "nanoinfer/error.h"

namespace nanoinfer {

KvCache::KvCache(size_t n_layers, size_t capacity, size_t kv_dim)
    : n_layers_(n_layers),
      capacity_(capacity),
      kv_dim_(kv_dim),
      k_(new float[n_layers * capacity * kv_dim]),
      v_(new float[n_layers * capacity * kv_dim]),
      appends_(n_layers, 0) {
  if (n_layers == 0 || capacity == 0 || kv_dim == 0) {
    fail("kv cache: layers ({}), capacity ({}) and kv_dim ({}) must all be positive", n_layers, capacity,
         kv_dim);
  }
}

void KvCache::clear() {
  length_ = 0;
  abort_step();
}

void KvCache::truncate(size_t n) {
  if (n > length_) fail("kv cache: cannot truncate to {} positions, only {} are cached", n, length_);
  length_ = n;
  abort_step();
}

void KvCache::begin_step(size_t n) {
  if (step_open_) fail("kv cache: a step of {} positions is already open", step_n_);
  if (n == 0) fail("kv cache: a step needs at least one position");
  if (n > capacity_ - length_) {
    fail("kv cache: {} new positions do not fit: {} of {} are in use", n, length_, capacity_);
  }
  step_open_ = true;
  step_n_ = n;
  std::fill(appends_.begin(), appends_.end(), 0u);
}

KvCache::Rows KvCache::append(size_t layer) {
  if (!step_open_) fail("kv cache: append to layer {} outside a step", layer);
  if (layer >= n_layers_) fail("kv cache: layer {} out of range ({} layers)", layer, n_layers_);
  ++appends_[layer];
  const size_t offset = (layer * capacity_ + length_) * kv_dim_;
  return {k_.get() + offset, v_.get() + offset};
}

void KvCache::commit() {
  if (!step_open_) fail("kv cache: commit without an open step");
  std::string skipped, twice;
  for (size_t l = 0; l < n_layers_; ++l) {
    std::string& list = appends_[l] == 0 ? skipped : twice;
    if (appends_[l] != 1) list += fmt::format("{}{}", list.empty() ? "" : ", ", l);
  }
  if (!skipped.empty() || !twice.empty()) {
    fail("kv cache: refusing to commit {} positions: layers not written: [{}]; layers written more than once: [{}]",
         step_n_, skipped, twice);
  }
  length_ += step_n_;
  step_open_ = false;
  step_n_ = 0;
}

void KvCache::abort_step() {
  step_open_ = false;
  step_n_ = 0;
}

}  // namespace nanoinfer
