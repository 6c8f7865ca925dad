// The KV cache's step protocol: extend every layer exactly once, then commit.
#include <gtest/gtest.h>

#include <string>

#include "nanoinfer/error.h"
#include "nanoinfer/kv_cache.h"

namespace nanoinfer {
namespace {

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KvCache, StepAppendsRowsAfterTheCommittedOnes) {
  KvCache cache(2, 8, 4);  // 2 layers, 8 positions, 4 floats per position
  EXPECT_EQ(cache.capacity(), 8u);
  EXPECT_EQ(cache.bytes(), 2u * 2 * 8 * 4 * sizeof(float));
  cache.begin_step(3);
  for (size_t l = 0; l < 2; ++l) {
    KvCache::Rows rows = cache.append(l);
    EXPECT_EQ(rows.k, cache.keys(l));
    EXPECT_EQ(rows.v, cache.values(l));
    for (size_t i = 0; i < 12; ++i) rows.k[i] = static_cast<float>(100 * l + i);
  }
  EXPECT_EQ(cache.length(), 0u);  // not before commit
  cache.commit();
  EXPECT_EQ(cache.length(), 3u);

  cache.begin_step(2);
  for (size_t l = 0; l < 2; ++l) {
    KvCache::Rows rows = cache.append(l);
    EXPECT_EQ(rows.k, cache.keys(l) + 3 * 4);  // positions continue from the length
    EXPECT_EQ(rows.v, cache.values(l) + 3 * 4);
  }
  cache.commit();
  EXPECT_EQ(cache.length(), 5u);
  EXPECT_EQ(cache.keys(1)[11], 111.0f);  // the first step's rows survive
}

TEST(KvCache, CommitRefusesASkippedLayerAndNamesIt) {
  KvCache cache(4, 8, 2);
  cache.begin_step(1);
  cache.append(0);
  cache.append(2);
  const std::string msg = error_of([&] { cache.commit(); });
  EXPECT_NE(msg.find("layers not written: [1, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("written more than once: []"), std::string::npos) << msg;
  EXPECT_EQ(cache.length(), 0u);
  EXPECT_TRUE(cache.step_open());
}

TEST(KvCache, CommitRefusesALayerWrittenTwiceAndNamesIt) {
  KvCache cache(3, 8, 2);
  cache.begin_step(2);
  cache.append(0);
  cache.append(1);
  cache.append(1);
  cache.append(2);
  const std::string msg = error_of([&] { cache.commit(); });
  EXPECT_NE(msg.find("layers not written: []"), std::string::npos) << msg;
  EXPECT_NE(msg.find("written more than once: [1]"), std::string::npos) << msg;
  EXPECT_EQ(cache.length(), 0u);
  // Discarding the step leaves the cache usable.
  cache.abort_step();
  cache.begin_step(2);
  for (size_t l = 0; l < 3; ++l) cache.append(l);
  cache.commit();
  EXPECT_EQ(cache.length(), 2u);
}

TEST(KvCache, StepsMustFitAndNotNest) {
  KvCache cache(1, 4, 2);
  EXPECT_NE(error_of([&] { cache.begin_step(5); }).find("5 new positions do not fit: 0 of 4"), std::string::npos);
  EXPECT_THROW(cache.begin_step(0), Error);
  cache.begin_step(4);
  EXPECT_THROW(cache.begin_step(1), Error);
  EXPECT_THROW(cache.append(1), Error);  // no such layer
  cache.append(0);
  cache.commit();
  EXPECT_THROW(cache.begin_step(1), Error);  // full
  EXPECT_THROW(cache.append(0), Error);      // outside a step
  EXPECT_THROW(cache.commit(), Error);
}

TEST(KvCache, TruncateAndClear) {
  KvCache cache(1, 8, 2);
  cache.begin_step(6);
  cache.append(0);
  cache.commit();
  EXPECT_THROW(cache.truncate(7), Error);
  cache.truncate(4);
  EXPECT_EQ(cache.length(), 4u);
  cache.begin_step(1);
  EXPECT_EQ(cache.append(0).k, cache.keys(0) + 4 * 2);
  cache.clear();  // also drops the open step
  EXPECT_EQ(cache.length(), 0u);
  EXPECT_FALSE(cache.step_open());
  EXPECT_THROW(KvCache(0, 8, 2), Error);
}

}  // namespace
}  // namespace nanoinfer
