#include "nanoinfer/kv_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGE_SIZE));
  return page;
}

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// madvise's synchronous huge-page collapse: Linux 6.1's ABI value (glibc 2.36's headers do not
// name it); an older kernel refuses it with EINVAL, and the advice is dropped.
#ifdef MADV_COLLAPSE
constexpr int kMadvCollapse = MADV_COLLAPSE;
#else
constexpr int kMadvCollapse = 25;
#endif

// MemAvailable from /proc/meminfo, in bytes (0 when it cannot be read: then only the OS
// decides). Read into a stack buffer: growing the cache allocates nothing on the heap.
uint64_t available_memory() {
  const int fd = ::open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  const ssize_t got = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (got <= 0) return 0;
  buf[got] = '\0';
  const char* line = std::strstr(buf, "MemAvailable:");
  if (!line) return 0;
  line += std::strlen("MemAvailable:");
  while (*line == ' ') ++line;
  uint64_t kib = 0;
  for (; *line >= '0' && *line <= '9'; ++line) kib = kib * 10 + static_cast<uint64_t>(*line - '0');
  return kib * 1024;
}

// f32 -> the cache's element type, rounding to nearest even. f16 saturates at +-65504 instead
// of overflowing to infinity (an infinite key would turn its scores into NaN).
void narrow(const float* src, std::byte* dst, size_t n, DType type) {
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::BF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16:
      f32_to_f16_n(src, reinterpret_cast<uint16_t*>(dst), n, /*saturate=*/true);
      return;
    default:
      break;
  }
  fail("kv cache: unsupported element type {}", dtype_name(type));
}

}  // namespace

bool is_kv_type(DType type) {
  return type == DType::F32 || type == DType::BF16 || type == DType::F16;
}

const char* kv_type_name(DType type) {
  switch (type) {
    case DType::F32:
      return "f32";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
    default:
      return "?";
  }
}

std::optional<DType> kv_type_from_name(std::string_view name) {
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    if (name == kv_type_name(t)) return t;
  return std::nullopt;
}

KvCache::KvCache(size_t n_layers, size_t capacity, size_t kv_dim, DType type, Pages pages)
    : n_layers_(n_layers), capacity_(capacity), kv_dim_(kv_dim), type_(type), appends_(n_layers, 0) {
  if (n_layers == 0 || capacity == 0 || kv_dim == 0) {
    fail("kv cache: layers ({}), capacity ({}) and kv_dim ({}) must all be positive", n_layers, capacity, kv_dim);
  }
  if (!is_kv_type(type)) fail("kv cache: unsupported element type {}", dtype_name(type));
  const size_t row = kv_dim * dtype_size(type);
  // Huge pages commit the least multiple of kCommitPositions whose rows are whole huge pages;
  // only where that is at most a quarter of the capacity, so the cache still commits as it is
  // used (a small model's 2 MiB region would otherwise be committed whole at the first token).
  // They start on small pages all the same (use_huge_pages).
  const size_t huge_positions = std::lcm(kHugePage / std::gcd(row, kHugePage), kCommitPositions);
  const bool huge = pages == Pages::huge && huge_positions <= capacity / 4;
  huge_positions_ = huge ? huge_positions : 0;
  page_bytes_ = page_size();
  commit_positions_ = kCommitPositions;
  region_bytes_ = round_up(capacity * row, huge ? kHugePage : page_bytes_);
  // Address space only: nothing is committed (or counted against memory) until grow(). Huge:
  // one huge page more, so that the regions can start on a huge page boundary.
  map_bytes_ = 2 * n_layers * region_bytes_ + (huge ? kHugePage : 0);
  void* p = ::mmap(nullptr, map_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    fail("kv cache: cannot reserve {:.1f} MiB of address space for {} positions: {}",
         static_cast<double>(map_bytes_) / (1 << 20), capacity, std::strerror(errno));
  }
  map_ = p;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  base_ = static_cast<std::byte*>(p) + (huge ? round_up(addr, kHugePage) - addr : 0);
}

KvCache::KvCache(KvCache&& o) noexcept {
  *this = std::move(o);
}

KvCache& KvCache::operator=(KvCache&& o) noexcept {
  if (this == &o) return *this;
  release();
  n_layers_ = o.n_layers_;
  capacity_ = o.capacity_;
  kv_dim_ = o.kv_dim_;
  type_ = o.type_;
  length_ = o.length_;
  base_ = o.base_;
  region_bytes_ = o.region_bytes_;
  map_ = o.map_;
  map_bytes_ = o.map_bytes_;
  page_bytes_ = o.page_bytes_;
  commit_positions_ = o.commit_positions_;
  huge_positions_ = o.huge_positions_;
  committed_ = o.committed_;
  writable_ = o.writable_;
  collapse_ = o.collapse_;
  step_open_ = o.step_open_;
  step_n_ = o.step_n_;
  appends_ = std::move(o.appends_);
  copy_listener_ = std::move(o.copy_listener_);
  o.base_ = nullptr;
  o.map_ = nullptr;
  o.map_bytes_ = 0;
  o.n_layers_ = o.capacity_ = o.kv_dim_ = o.length_ = o.region_bytes_ = o.committed_ = o.step_n_ = 0;
  o.writable_ = o.collapse_ = o.huge_positions_ = 0;
  o.step_open_ = false;
  return *this;
}

KvCache::~KvCache() {
  release();
}

void KvCache::release() noexcept {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  base_ = nullptr;
}

size_t KvCache::committed_bytes() const {
  return 2 * n_layers_ * writable_;
}

// Past kHugeAfter positions: the regions become transparent huge pages (advice: without THP
// they stay small pages), committed from now on in whole huge pages; the huge pages holding
// rows written on small pages are collapsed at the next growth, once they are writable whole.
void KvCache::use_huge_pages() {
  (void)::madvise(base_, 2 * n_layers_ * region_bytes_, MADV_HUGEPAGE);
  page_bytes_ = kHugePage;
  commit_positions_ = huge_positions_;
  collapse_ = round_up(writable_, kHugePage);
}

void KvCache::grow(size_t positions) {
  if (huge_positions_ != 0 && page_bytes_ != kHugePage && positions > kHugeAfter) use_huge_pages();
  const size_t target = std::min(capacity_, round_up(positions, commit_positions_));
  const size_t row = kv_dim_ * dtype_size(type_);
  const size_t from = writable_;
  const size_t to = std::max(from, round_up(target * row, page_bytes_));
  if (to > from) {
    const uint64_t more = 2 * n_layers_ * static_cast<uint64_t>(to - from);
    const uint64_t available = available_memory();
    if (available != 0 && more > available) {
      fail(
          "the KV cache needs {:.1f} MiB more for positions up to {} ({} bytes per position, {}), but only "
          "{:.1f} MiB of memory are available: use a shorter context or a smaller --kv-type",
          static_cast<double>(more) / (1 << 20), target, bytes_per_position(), kv_type_name(type_),
          static_cast<double>(available) / (1 << 20));
    }
    for (size_t i = 0; i < 2 * n_layers_; ++i) {
      if (::mprotect(region(i) + from, to - from, PROT_READ | PROT_WRITE) != 0) {
        const int err = errno;
        for (size_t j = 0; j < i; ++j) ::mprotect(region(j) + from, to - from, PROT_NONE);
        fail("the KV cache cannot commit {:.1f} MiB for positions up to {}: {}", static_cast<double>(more) / (1 << 20),
             target, std::strerror(err));
      }
    }
  }
  writable_ = to;
  if (collapse_ != 0 && collapse_ <= writable_) {
    for (size_t i = 0; i < 2 * n_layers_; ++i) (void)::madvise(region(i), collapse_, kMadvCollapse);
    collapse_ = 0;
  }
  committed_ = target;
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

void KvCache::extend_from(const KvCache& src, size_t n) {
  if (src.n_layers_ != n_layers_ || src.kv_dim_ != kv_dim_ || src.type_ != type_) {
    fail("kv cache: cannot copy rows from a cache of {} layers x {} {} into one of {} layers x {} {}", src.n_layers_,
         src.kv_dim_, kv_type_name(src.type_), n_layers_, kv_dim_, kv_type_name(type_));
  }
  if (step_open_ || src.step_open_) fail("kv cache: cannot copy rows while a step is open");
  if (n > src.length_ || n > capacity_) {
    fail("kv cache: cannot copy {} positions: the source holds {}, the capacity is {}", n, src.length_, capacity_);
  }
  if (n <= length_) return;
  if (n > committed_) grow(n);
  const size_t row = kv_dim_ * dtype_size(type_);
  for (size_t i = 0; i < 2 * n_layers_; ++i) {
    std::memcpy(region(i) + length_ * row, src.region(i) + length_ * row, (n - length_) * row);
  }
  const size_t from = length_;
  length_ = n;
  if (copy_listener_) copy_listener_(src, from, n);
}

void KvCache::set_copy_listener(std::function<void(const KvCache& src, size_t from, size_t to)> listener) {
  copy_listener_ = std::move(listener);
}

void KvCache::begin_step(size_t n) {
  if (step_open_) fail("kv cache: a step of {} positions is already open", step_n_);
  if (n == 0) fail("kv cache: a step needs at least one position");
  if (n > capacity_ - length_) {
    fail("kv cache: {} new positions do not fit: {} of {} are in use", n, length_, capacity_);
  }
  if (length_ + n > committed_) grow(length_ + n);
  step_open_ = true;
  step_n_ = n;
  std::fill(appends_.begin(), appends_.end(), 0u);
}

void KvCache::append(size_t layer, const float* k, const float* v) {
  if (!step_open_) fail("kv cache: append to layer {} outside a step", layer);
  if (layer >= n_layers_) fail("kv cache: layer {} out of range ({} layers)", layer, n_layers_);
  ++appends_[layer];
  const size_t offset = length_ * kv_dim_ * dtype_size(type_);
  narrow(k, region(2 * layer) + offset, step_n_ * kv_dim_, type_);
  narrow(v, region(2 * layer + 1) + offset, step_n_ * kv_dim_, type_);
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
