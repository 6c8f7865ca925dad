// The model's whole context by default, its KV memory committed as positions are used, and
// the compact KV cache's logits against the f32 cache's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nanoinfer/config.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/synth.h"
#include "support/files.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

// A tiny model (2 layers, kv_dim 32) that declares Qwen2.5's 32,768 positions.
std::string config_32k() {
  std::string c = test::small_qwen2_config_json();
  const std::string from = "\"max_position_embeddings\": 512";
  c.replace(c.find(from), from.size(), "\"max_position_embeddings\": 32768");
  return c;
}

TEST(LongContext, AFreshSessionOfTheWholeContextCommitsMemoryAsPositionsAreUsed) {
  test::TempDir dir;
  test::write_text(dir / "config.json", config_32k());
  write_synthetic_weights(ModelConfig::load(dir / "config.json"), dir / "model.safetensors", {.seed = 3});
  const Model model = open_model_alone(dir.path(), {.threads = 1});
  EXPECT_EQ(model.max_context(), 32768u);  // the model's own, not a smaller cap
  EXPECT_EQ(model.options().kv_type, DType::F16);
  Sequence seq = model.new_sequence();
  const KvCache& cache = seq.cache();
  EXPECT_EQ(cache.capacity(), 32768u);
  EXPECT_EQ(cache.committed_bytes(), 0u);
  const size_t chunk = KvCache::kCommitPositions;
  // Per layer and K/V: chunk * kv_dim (32) * 2 bytes = 16 KiB, whole pages.
  const size_t per_chunk = chunk * cache.bytes_per_position();
  std::vector<int32_t> tokens(300);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 256);
  model.forward(std::span(tokens).first(100), seq);
  EXPECT_EQ(cache.committed_bytes(), per_chunk);
  model.forward(std::span(tokens).subspan(100), seq);
  EXPECT_EQ(cache.length(), 300u);
  EXPECT_EQ(cache.committed_bytes(), 2 * per_chunk);
  // 2 chunks of 256 positions: 1/64 of the 32k cache's bytes.
  EXPECT_EQ(cache.bytes(), 64 * cache.committed_bytes());
}

// The compact cache against the f32 cache on the default model, every position's logits of a
// 200-token prompt. Bound: each cached element is rounded once, by a relative 2^-12 (f16) or
// 2^-9 (bf16); over the model's 4 layers that moves the logits by a small multiple of that
// relative error times their spread. We hold the maximum logit difference to
//   f16: 2^-12 * 4 * spread,   bf16: 2^-9 * 4 * spread
// (spread = max - min of the f32-cache logits; measured: about 10 times below: 0.0028 and 0.0185
// for a spread of 29.3). A cache that read
// a wrong row, a wrong head or the wrong type's bits moves logits by O(spread) and fails; and
// f16 must be closer than bf16 (the rounding is the type's, not truncation or none).
TEST(LongContext, CompactCacheLogitsStayWithinTheirBoundOfTheF32Cache) {
  std::vector<int32_t> tokens(200);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % 2048);
  auto run = [&](DType type) {
    const Model model = open_model_alone(test::default_model_dir(), {.threads = 2, .kv_type = type});
    Sequence seq = model.new_sequence();
    const auto out = model.forward(tokens, seq, true);
    return std::vector<float>(out.begin(), out.end());
  };
  const std::vector<float> ref = run(DType::F32);
  const auto [lo, hi] = std::minmax_element(ref.begin(), ref.end());
  const double spread = double(*hi) - double(*lo);
  double diff[2] = {0, 0};
  int i = 0;
  for (DType type : {DType::F16, DType::BF16}) {
    const std::vector<float> got = run(type);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t j = 0; j < got.size(); ++j) diff[i] = std::max(diff[i], std::abs(double(got[j]) - double(ref[j])));
    const double bound = (type == DType::F16 ? 0x1p-12 : 0x1p-9) * 4 * spread;
    EXPECT_LE(diff[i], bound) << kv_type_name(type);
    EXPECT_GT(diff[i], 0.0) << kv_type_name(type) << ": the cache did not round";
    std::printf(
        "default model, 200 positions: max |logit(%s cache) - logit(f32 cache)| = %.3g (bound %.3g, spread %.3g)\n",
        kv_type_name(type), diff[i], bound, spread);
    ++i;
  }
  EXPECT_LT(diff[0], diff[1]);
}

TEST(LongContext, BadKvTypeIsAOneLineError) {
  const test::CliResult r = test::run_cli({"generate", "-p", "hi", "-n", "1", "--kv-type", "nonsense"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--kv-type must be f32, bf16 or f16, got 'nonsense'"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace nanoinfer
