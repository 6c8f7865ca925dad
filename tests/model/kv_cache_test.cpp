// The KV cache's step protocol (extend every layer exactly once, then commit), its element
// types, and its memory: committed as positions are used, counted in bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "nanoinfer/kv_cache.h"
#include "support/checks.h"

namespace nanoinfer {
namespace {

using test::error_of;

// Appends rows of value `x` to the open step of `layer`.
void append(KvCache& cache, size_t layer, float x = 0.0f) {
  const std::vector<float> rows(cache.step_size() * cache.kv_dim(), x);
  cache.append(layer, rows.data(), rows.data());
}

const float* keys_f32(const KvCache& cache, size_t layer) {
  return static_cast<const float*>(cache.keys(layer));
}

TEST(KvCache, StepAppendsRowsAfterTheCommittedOnes) {
  KvCache cache(2, 8, 4);  // 2 layers, 8 positions, 4 floats per position
  EXPECT_EQ(cache.capacity(), 8u);
  EXPECT_EQ(cache.bytes(), 2u * 2 * 8 * 4 * sizeof(float));
  EXPECT_EQ(cache.bytes_per_position(), 2u * 2 * 4 * sizeof(float));
  cache.begin_step(3);
  for (size_t l = 0; l < 2; ++l) {
    std::vector<float> k(12), v(12);
    for (size_t i = 0; i < 12; ++i) {
      k[i] = static_cast<float>(100 * l + i);
      v[i] = -k[i];
    }
    cache.append(l, k.data(), v.data());
  }
  EXPECT_EQ(cache.length(), 0u);  // not before commit
  cache.commit();
  EXPECT_EQ(cache.length(), 3u);

  cache.begin_step(2);
  for (size_t l = 0; l < 2; ++l) append(cache, l, 7.0f);
  cache.commit();
  EXPECT_EQ(cache.length(), 5u);
  EXPECT_EQ(keys_f32(cache, 1)[11], 111.0f);  // the first step's rows survive
  EXPECT_EQ(static_cast<const float*>(cache.values(1))[11], -111.0f);
  EXPECT_EQ(keys_f32(cache, 1)[3 * 4], 7.0f);  // positions continue from the length
}

TEST(KvCache, CommitRefusesASkippedLayerAndNamesIt) {
  KvCache cache(4, 8, 2);
  cache.begin_step(1);
  append(cache, 0);
  append(cache, 2);
  const std::string msg = error_of([&] { cache.commit(); });
  EXPECT_NE(msg.find("layers not written: [1, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("written more than once: []"), std::string::npos) << msg;
  EXPECT_EQ(cache.length(), 0u);
  EXPECT_TRUE(cache.step_open());
}

TEST(KvCache, CommitRefusesALayerWrittenTwiceAndNamesIt) {
  KvCache cache(3, 8, 2);
  cache.begin_step(2);
  append(cache, 0);
  append(cache, 1);
  append(cache, 1);
  append(cache, 2);
  const std::string msg = error_of([&] { cache.commit(); });
  EXPECT_NE(msg.find("layers not written: []"), std::string::npos) << msg;
  EXPECT_NE(msg.find("written more than once: [1]"), std::string::npos) << msg;
  EXPECT_EQ(cache.length(), 0u);
  // Discarding the step leaves the cache usable.
  cache.abort_step();
  cache.begin_step(2);
  for (size_t l = 0; l < 3; ++l) append(cache, l);
  cache.commit();
  EXPECT_EQ(cache.length(), 2u);
}

TEST(KvCache, StepsMustFitAndNotNest) {
  KvCache cache(1, 4, 2);
  EXPECT_NE(error_of([&] { cache.begin_step(5); }).find("5 new positions do not fit: 0 of 4"), std::string::npos);
  EXPECT_THROW(cache.begin_step(0), Error);
  cache.begin_step(4);
  EXPECT_THROW(cache.begin_step(1), Error);
  EXPECT_THROW(append(cache, 1), Error);  // no such layer
  append(cache, 0);
  cache.commit();
  EXPECT_THROW(cache.begin_step(1), Error);  // full
  EXPECT_THROW(append(cache, 0), Error);     // outside a step
  EXPECT_THROW(cache.commit(), Error);
}

TEST(KvCache, TruncateAndClear) {
  KvCache cache(1, 8, 2);
  cache.begin_step(6);
  append(cache, 0, 1.0f);
  cache.commit();
  EXPECT_THROW(cache.truncate(7), Error);
  cache.truncate(4);
  EXPECT_EQ(cache.length(), 4u);
  cache.begin_step(1);
  append(cache, 0, 2.0f);
  EXPECT_EQ(keys_f32(cache, 0)[4 * 2], 2.0f);
  EXPECT_EQ(keys_f32(cache, 0)[3 * 2], 1.0f);
  cache.clear();  // also drops the open step
  EXPECT_EQ(cache.length(), 0u);
  EXPECT_FALSE(cache.step_open());
  EXPECT_THROW(KvCache(0, 8, 2), Error);
  EXPECT_THROW(KvCache(1, 8, 2, DType::I8), Error);
}

// The compact types hold exactly half of f32's bytes per position, and round to nearest even
// (f16 saturating at the largest finite value instead of overflowing).
TEST(KvCache, CompactTypesHalveTheBytesAndRoundToNearest) {
  const KvCache f32(24, 1024, 128, DType::F32);
  for (DType type : {DType::BF16, DType::F16}) {
    KvCache c(24, 1024, 128, type);
    EXPECT_EQ(2 * c.bytes_per_position(), f32.bytes_per_position()) << kv_type_name(type);
    EXPECT_EQ(c.bytes_per_position(), 2u * 24 * 128 * 2);
    EXPECT_EQ(2 * c.bytes(), f32.bytes());
    c.begin_step(1);
    for (size_t l = 0; l < 24; ++l) {
      std::vector<float> k(128, 1.0f + 0x1p-20f), v(128, -3.14159f);
      k[1] = 1e6f;
      k[2] = -1e6f;
      c.append(l, k.data(), v.data());
    }
    c.commit();
    const auto* k = static_cast<const uint16_t*>(c.keys(23));
    const auto* v = static_cast<const uint16_t*>(c.values(23));
    if (type == DType::BF16) {
      EXPECT_EQ(k[0], f32_to_bf16(1.0f + 0x1p-20f));
      EXPECT_EQ(v[0], f32_to_bf16(-3.14159f));
      EXPECT_EQ(bf16_to_f32(k[1]), bf16_to_f32(f32_to_bf16(1e6f)));
    } else {
      EXPECT_EQ(k[0], f32_to_f16(1.0f));
      EXPECT_EQ(v[0], f32_to_f16(-3.14159f));
      EXPECT_EQ(f16_to_f32(k[1]), 65504.0f);  // saturated, not infinity
      EXPECT_EQ(f16_to_f32(k[2]), -65504.0f);
    }
  }
  EXPECT_EQ(kv_type_from_name("f16"), DType::F16);
  EXPECT_EQ(kv_type_from_name("bf16"), DType::BF16);
  EXPECT_EQ(kv_type_from_name("f32"), DType::F32);
  EXPECT_FALSE(kv_type_from_name("nonsense"));
}

// A 32,768-position cache of Qwen2.5-0.5B's shape (24 layers, kv_dim 128) commits memory for
// the positions it holds, in chunks of kCommitPositions, not for its capacity.
TEST(KvCache, CommitsMemoryProportionalToPositionsUsed) {
  const size_t layers = 24, kv_dim = 128, chunk = KvCache::kCommitPositions;
  KvCache c(layers, 32768, kv_dim, DType::F16);
  EXPECT_EQ(c.bytes(), 32768u * 2 * layers * kv_dim * 2);  // 384 MiB at full capacity
  EXPECT_EQ(c.committed_bytes(), 0u);
  // chunk * kv_dim * 2 bytes = 64 KiB per region: a whole number of pages.
  const size_t per_chunk = 2 * layers * chunk * kv_dim * 2;
  size_t pushed = 0;
  for (size_t step : {10u, 1u, 245u, 1u, 300u, 1u}) {
    c.begin_step(step);
    for (size_t l = 0; l < layers; ++l) append(c, l, 0.5f);
    c.commit();
    pushed += step;
    const size_t chunks = (pushed + chunk - 1) / chunk;
    EXPECT_EQ(c.committed_positions(), chunks * chunk) << pushed;
    EXPECT_EQ(c.committed_bytes(), chunks * per_chunk) << pushed;
    EXPECT_LE(c.committed_bytes(), (pushed + chunk) * c.bytes_per_position());
  }
  EXPECT_EQ(pushed, 558u);
  EXPECT_EQ(c.committed_bytes(), 3 * per_chunk);  // 9 MiB of the 384
  // Clearing keeps the memory for reuse; the rows written are still there to overwrite.
  c.clear();
  EXPECT_EQ(c.committed_bytes(), 3 * per_chunk);
  // Moving hands the mapping over.
  KvCache moved = std::move(c);
  EXPECT_EQ(moved.committed_bytes(), 3 * per_chunk);
  EXPECT_EQ(moved.capacity(), 32768u);
}

// Pages::huge: regions of at least 2 MiB start on a 2 MiB boundary and, asked for more than
// kHugeAfter positions, are committed in whole huge pages (Qwen2.5-0.5B's f16 rows: 256 bytes,
// so 8,192 positions at a time); the rows of the first huge page and of the next one read
// back what was appended across the boundary. (Whether the kernel backs them with huge pages
// is its choice; this checks what we ask.)
TEST(KvCache, HugePagesAlignRegionsAndCommitWholeHugePages) {
  const size_t layers = 2, kv_dim = 128, huge = KvCache::kHugePage;
  KvCache c(layers, 32768, kv_dim, DType::F16, KvCache::Pages::huge);
  EXPECT_TRUE(c.huge_capable());
  EXPECT_FALSE(c.huge_pages());  // not before the first growth past kHugeAfter
  EXPECT_EQ(c.commit_positions(), KvCache::kCommitPositions);
  EXPECT_EQ(c.commit_positions() % KvCache::kCommitPositions, 0u);
  EXPECT_EQ(c.bytes(), 32768u * 2 * layers * kv_dim * 2);
  for (size_t l = 0; l < layers; ++l) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.keys(l)) % huge, 0u) << l;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.values(l)) % huge, 0u) << l;
  }
  EXPECT_EQ(c.committed_bytes(), 0u);
  c.begin_step(8191);
  for (size_t l = 0; l < layers; ++l) append(c, l, 1.0f);
  c.commit();
  EXPECT_TRUE(c.huge_pages());
  EXPECT_EQ(c.commit_positions(), 8192u);
  EXPECT_EQ(c.committed_positions(), 8192u);
  EXPECT_EQ(c.committed_bytes(), 2 * layers * huge);  // one huge page per region
  c.begin_step(2);                                    // positions 8191 and 8192: across the boundary
  for (size_t l = 0; l < layers; ++l) append(c, l, 2.0f);
  c.commit();
  EXPECT_EQ(c.committed_positions(), 16384u);
  EXPECT_EQ(c.committed_bytes(), 2 * 2 * layers * huge);
  const uint16_t one = f32_to_f16(1.0f), two = f32_to_f16(2.0f);
  for (size_t l = 0; l < layers; ++l) {
    const auto* k = static_cast<const uint16_t*>(c.keys(l));
    const auto* v = static_cast<const uint16_t*>(c.values(l));
    for (size_t pos : {size_t{0}, size_t{8190}, size_t{8191}, size_t{8192}}) {
      const uint16_t want = pos < 8191 ? one : two;
      EXPECT_EQ(k[pos * kv_dim], want) << l << " " << pos;
      EXPECT_EQ(v[pos * kv_dim + kv_dim - 1], want) << l << " " << pos;
    }
  }
  KvCache moved = std::move(c);
  EXPECT_TRUE(moved.huge_pages());
  EXPECT_EQ(moved.committed_bytes(), 2 * 2 * layers * huge);
}

// Rows that do not divide a huge page (kv_dim 640 in f16: 1,280 bytes) commit, once on huge
// pages, the least multiple of kCommitPositions that fills whole huge pages (8,192 positions:
// 5 huge pages); where that would be more than a quarter of the capacity (a region of 1 MiB,
// or of 2 MiB that a first commit would take whole) the cache keeps small pages and
// 256-position commits.
TEST(KvCache, HugePagesCommitWholePagesOfAnyRowAndOnlyWhereTheyAreAFractionOfTheCache) {
  KvCache odd(1, 32768, 640, DType::F16, KvCache::Pages::huge);
  EXPECT_TRUE(odd.huge_capable());
  odd.begin_step(1);
  append(odd, 0, 3.0f);
  odd.commit();
  EXPECT_FALSE(odd.huge_pages());
  EXPECT_EQ(odd.committed_bytes(), 2u * 256 * 1280);  // 256 positions, whole 4 KiB pages
  odd.begin_step(KvCache::kHugeAfter);                // 1,025 positions asked for
  append(odd, 0, 4.0f);
  odd.commit();
  EXPECT_TRUE(odd.huge_pages());
  EXPECT_EQ(odd.commit_positions(), 8192u);
  EXPECT_EQ(odd.committed_bytes(), 2u * 5 * KvCache::kHugePage);
  EXPECT_EQ(odd.committed_bytes() % KvCache::kHugePage, 0u);
  EXPECT_EQ(static_cast<const uint16_t*>(odd.keys(0))[639], f32_to_f16(3.0f));  // written on a small page
  EXPECT_EQ(static_cast<const uint16_t*>(odd.values(0))[1024 * 640], f32_to_f16(4.0f));

  KvCache small(4, 4096, 128, DType::F16, KvCache::Pages::huge);  // 1 MiB regions
  EXPECT_FALSE(small.huge_capable());
  EXPECT_FALSE(small.huge_pages());
  EXPECT_EQ(small.commit_positions(), KvCache::kCommitPositions);
  small.begin_step(1);
  for (size_t l = 0; l < 4; ++l) append(small, l, 1.0f);
  small.commit();
  EXPECT_EQ(small.committed_bytes(), 2u * 4 * 256 * 128 * 2);
  KvCache whole(1, 32768, 32, DType::F16, KvCache::Pages::huge);  // 2 MiB regions
  EXPECT_FALSE(whole.huge_capable());
  EXPECT_FALSE(whole.huge_pages());
  EXPECT_EQ(whole.commit_positions(), KvCache::kCommitPositions);
}

// A short prompt or a chat on a huge-page cache commits small pages, 256 positions at a time
// (Qwen2.5-0.5B's shape: 64 KiB per region, instead of a 2 MiB huge page that the kernel
// zeroes whole); the step that takes it past kHugeAfter positions moves it to huge pages,
// and every row written before reads back unchanged, token by token as a chat writes them.
TEST(KvCache, HugePagesOnlyPastTheFirstThousandPositionsAndEarlierRowsSurvive) {
  const size_t layers = 2, kv_dim = 128;
  KvCache c(layers, 32768, kv_dim, DType::F16, KvCache::Pages::huge);
  const auto value = [](size_t pos) { return static_cast<float>(pos % 1000) - 500.0f; };  // exact in f16
  const auto push = [&](size_t n) {
    c.begin_step(n);
    std::vector<float> k(n * kv_dim), v(n * kv_dim);
    for (size_t i = 0; i < n; ++i) {
      std::fill_n(k.begin() + static_cast<ptrdiff_t>(i * kv_dim), kv_dim, value(c.length() + i));
      std::fill_n(v.begin() + static_cast<ptrdiff_t>(i * kv_dim), kv_dim, -value(c.length() + i));
    }
    for (size_t l = 0; l < layers; ++l) c.append(l, k.data(), v.data());
    c.commit();
  };
  push(10);  // a prompt
  EXPECT_FALSE(c.huge_pages());
  EXPECT_EQ(c.committed_bytes(), 2 * layers * 256 * kv_dim * 2);  // 64 KiB per region
  while (c.length() < KvCache::kHugeAfter) push(1);               // decoded token by token
  EXPECT_FALSE(c.huge_pages());
  EXPECT_EQ(c.committed_positions(), KvCache::kHugeAfter);
  EXPECT_EQ(c.committed_bytes(), 2 * layers * KvCache::kHugeAfter * kv_dim * 2);  // 256 KiB per region
  push(1);                                                                        // position 1,024: the 1,025th
  EXPECT_TRUE(c.huge_pages());
  EXPECT_EQ(c.committed_positions(), 8192u);
  EXPECT_EQ(c.committed_bytes(), 2 * layers * KvCache::kHugePage);
  push(3);
  for (size_t l = 0; l < layers; ++l) {
    const auto* k = static_cast<const uint16_t*>(c.keys(l));
    const auto* v = static_cast<const uint16_t*>(c.values(l));
    for (size_t pos = 0; pos < c.length(); ++pos) {
      ASSERT_EQ(k[pos * kv_dim + pos % kv_dim], f32_to_f16(value(pos))) << l << " " << pos;
      ASSERT_EQ(v[pos * kv_dim + kv_dim - 1], f32_to_f16(-value(pos))) << l << " " << pos;
    }
  }
}

// Growing past the memory the machine has is a one-line Error naming the sizes, not bad_alloc
// and not a crash at first touch: a cache of 2^20 positions x 16,384 floats (128 GiB for K and
// V of one layer) reserves its address space, then refuses the step that would commit it all.
TEST(KvCache, GrowthPastAvailableMemoryIsAOneLineError) {
  KvCache c(1, size_t{1} << 20, size_t{1} << 14, DType::F32);
  EXPECT_EQ(c.committed_bytes(), 0u);
  const std::string msg = error_of([&] { c.begin_step(size_t{1} << 20); });
  if (msg.empty()) GTEST_SKIP() << "this machine had 128 GiB available";
  EXPECT_NE(msg.find("the KV cache needs 131072.0 MiB more for positions up to 1048576"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MiB of memory are available"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_FALSE(c.step_open());
  EXPECT_EQ(c.committed_bytes(), 0u);
  // A step that fits still works.
  c.begin_step(1);
  append(c, 0, 1.0f);
  c.commit();
  EXPECT_EQ(c.length(), 1u);
}

}  // namespace
}  // namespace nanoinfer
