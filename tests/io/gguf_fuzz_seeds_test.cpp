// The seed corpus of fuzz/fuzz_gguf.cpp (fuzz/corpus/gguf/): small files made by GgufWriter.
// The committed seeds must stay what the writer makes (so they keep exercising every value and
// tensor type); regenerate them after a format change with
//   build/release/nanoinfer_tests --gtest_also_run_disabled_tests
//       --gtest_filter='GgufFuzzSeeds.DISABLED_Write'
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "nanoinfer/error.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

std::filesystem::path corpus_dir() {
  return std::filesystem::path(NANOINFER_SOURCE_DIR) / "fuzz" / "corpus" / "gguf";
}

std::vector<std::byte> pattern(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 131 + 7);
  return v;
}

void every_value_type(GgufWriter& w) {
  w.set_string("general.architecture", "qwen2");
  w.set("v.u8", {uint8_t{1}});
  w.set("v.i8", {int8_t{-1}});
  w.set("v.u16", {uint16_t{2}});
  w.set("v.i16", {int16_t{-2}});
  w.set_u32("v.u32", 3);
  w.set_i32("v.i32", -3);
  w.set_f32("v.f32", 0.5f);
  w.set_bool("v.bool", true);
  w.set("v.u64", {uint64_t{4}});
  w.set("v.i64", {int64_t{-4}});
  w.set("v.f64", {0.25});
  w.set_array("a.string", {std::vector<std::string>{"a", "", "bc"}});
  w.set_array("a.bool", {std::vector<bool>{true, false}});
  w.set_array("a.i32", {std::vector<int32_t>{1, -1}});
  w.set_array("a.nested",
              {std::vector<GgufArray>{{std::vector<uint8_t>{9}}, {std::vector<GgufArray>{{std::vector<float>{}}}}}});
}

void every_tensor_type(GgufWriter& w, std::vector<std::vector<std::byte>>& keep) {
  w.set_u32("general.alignment", 64);
  const std::vector<std::pair<GgmlType, std::vector<uint64_t>>> tensors = {
      {ggml_type_of(WeightType::F32), {4, 2}},        {GgmlType::F16, {3}},
      {ggml_type_of(WeightType::BF16), {2, 1, 1, 2}}, {ggml_type_of(WeightType::Q8_0), {32, 2}},
      {ggml_type_of(WeightType::Q4_0), {32}},         {ggml_type_of(WeightType::Q4_1), {32}},
      {ggml_type_of(WeightType::Q5_0), {64}},         {ggml_type_of(WeightType::Q5_1), {32}},
      {ggml_type_of(WeightType::Q4_K), {256}},        {ggml_type_of(WeightType::Q5_K), {256}},
      {ggml_type_of(WeightType::Q6_K), {256}},        {ggml_type_of(WeightType::F32), {0, 3}},
  };
  keep.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [type, dims] = tensors[i];
    uint64_t numel = 1;
    for (uint64_t d : dims) numel *= d;
    keep.push_back(pattern(ggml_row_bytes(type, numel)));
    w.add("t" + std::to_string(i), type, dims, keep.back());
  }
}

void qwen2_tiny(GgufWriter& w, std::vector<std::vector<std::byte>>& keep) {
  w.set_string("general.architecture", "qwen2");
  w.set_u32("qwen2.block_count", 1);
  w.set_u32("qwen2.context_length", 64);
  w.set_u32("qwen2.embedding_length", 32);
  w.set_u32("qwen2.feed_forward_length", 64);
  w.set_u32("qwen2.attention.head_count", 2);
  w.set_u32("qwen2.attention.head_count_kv", 1);
  w.set_f32("qwen2.rope.freq_base", 1000000.0f);
  w.set_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_array("tokenizer.ggml.tokens", {std::vector<std::string>{"a", "b", "ab", "<|im_end|>"}});
  w.set_array("tokenizer.ggml.token_type", {std::vector<int32_t>{1, 1, 1, 3}});
  w.set_array("tokenizer.ggml.merges", {std::vector<std::string>{"a b"}});
  w.set_u32("tokenizer.ggml.eos_token_id", 3);
  keep.reserve(2);
  keep.push_back(pattern(32 * 4 * 4));
  w.add("token_embd.weight", ggml_type_of(WeightType::F32), {32, 4}, keep.back());
  keep.push_back(pattern(32 * 4));
  w.add("output_norm.weight", ggml_type_of(WeightType::F32), {32}, keep.back());
}

struct Seed {
  std::string name;
  std::function<std::vector<std::byte>(const test::TempDir&)> make;
};

std::vector<std::byte> written(const test::TempDir& dir, const std::function<void(GgufWriter&)>& fill) {
  const auto path = dir / "seed.gguf";
  GgufWriter w(path);
  fill(w);
  w.write();
  return test::read_bytes(path);
}

std::vector<Seed> seeds() {
  return {
      {"valid_every_value_type", [](const test::TempDir& d) { return written(d, every_value_type); }},
      {"valid_every_tensor_type",
       [](const test::TempDir& d) {
         std::vector<std::vector<std::byte>> keep;
         return written(d, [&](GgufWriter& w) { every_tensor_type(w, keep); });
       }},
      {"valid_qwen2_tiny",
       [](const test::TempDir& d) {
         std::vector<std::vector<std::byte>> keep;
         return written(d, [&](GgufWriter& w) { qwen2_tiny(w, keep); });
       }},
      {"valid_v2_metadata_only",
       [](const test::TempDir& d) {
         auto bytes = written(d, [](GgufWriter& w) { w.set_string("general.name", "v2"); });
         bytes[4] = std::byte{2};  // version 2 has the same layout
         return bytes;
       }},
      {"bad_truncated",
       [](const test::TempDir& d) {
         auto bytes = written(d, every_value_type);
         bytes.resize(bytes.size() / 2);
         return bytes;
       }},
  };
}

TEST(GgufFuzzSeeds, CommittedSeedsMatchTheWriterAndParse) {
  test::TempDir dir;
  for (const Seed& seed : seeds()) {
    const auto path = corpus_dir() / seed.name;
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing; see the top of this file";
    const auto bytes = test::read_bytes(path);
    EXPECT_EQ(bytes, seed.make(dir)) << seed.name << " is stale; see the top of this file";
    if (seed.name.starts_with("valid_")) {
      EXPECT_NO_THROW(parse_gguf(bytes, seed.name)) << seed.name;
    } else {
      EXPECT_THROW(parse_gguf(bytes, seed.name), Error) << seed.name;
    }
  }
}

TEST(GgufFuzzSeeds, DISABLED_Write) {
  test::TempDir dir;
  std::filesystem::create_directories(corpus_dir());
  for (const Seed& seed : seeds()) test::write_bytes(corpus_dir() / seed.name, seed.make(dir));
}

}  // namespace
}  // namespace nanoinfer
