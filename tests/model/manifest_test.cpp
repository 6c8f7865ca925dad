#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "model/manifest.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

using ::testing::ElementsAre;

uint64_t numel(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

TEST(Manifest, Qwen25HalfBillionCounts) {
  const ModelConfig cfg = ModelConfig::load(test::qwen25_config_path());
  const auto m = tensor_manifest(cfg);
  size_t required = 0;
  uint64_t params = 0;
  std::map<TensorRole, uint64_t> by_role;
  std::set<std::string> names;
  for (const auto& spec : m) {
    EXPECT_TRUE(names.insert(spec.name).second) << "duplicate " << spec.name;
    if (!spec.required) continue;
    ++required;
    params += numel(spec.shape);
    by_role[spec.role] += numel(spec.shape);
  }
  EXPECT_EQ(required, 290u);
  EXPECT_EQ(params, 494'032'768u);
  EXPECT_EQ(by_role[TensorRole::Embedding], 151936u * 896);
  // Per layer: q, o [896, 896]; k, v [128, 896]; biases 896 + 128 + 128.
  EXPECT_EQ(by_role[TensorRole::Attention], 24u * (2 * 896 * 896 + 2 * 128 * 896 + 896 + 256));
  EXPECT_EQ(by_role[TensorRole::Mlp], 24u * 3 * 4864 * 896);
  EXPECT_EQ(by_role[TensorRole::Norm], (2u * 24 + 1) * 896);
  EXPECT_EQ(by_role[TensorRole::Output], 0u);
  // Tied: lm_head is listed, last, but optional.
  ASSERT_EQ(m.size(), 291u);
  EXPECT_EQ(m.back().name, "lm_head.weight");
  EXPECT_FALSE(m.back().required);
  EXPECT_EQ(m.back().role, TensorRole::Output);
}

// The GGUF names are a column of the same list: each maps to its Hugging Face name and back,
// and llama.cpp's spelling of the first layer is as expected.
TEST(Manifest, GgufNamesAreAColumnOfTheList) {
  const ModelConfig cfg = ModelConfig::load(test::qwen25_config_path());
  std::set<std::string> names;
  for (const auto& spec : tensor_manifest(cfg)) {
    EXPECT_TRUE(names.insert(spec.gguf_name).second) << "duplicate " << spec.gguf_name;
    EXPECT_EQ(hf_name_from_gguf(spec.gguf_name), spec.name);
    EXPECT_EQ(gguf_name_from_hf(spec.name), spec.gguf_name);
  }
  const auto m = tensor_manifest(cfg);
  EXPECT_EQ(m[0].gguf_name, "token_embd.weight");
  EXPECT_EQ(m[1].gguf_name, "blk.0.attn_norm.weight");
  EXPECT_EQ(m[2].gguf_name, "blk.0.attn_q.weight");
  EXPECT_EQ(m.back().gguf_name, "output.weight");
}

TEST(Manifest, OrderAndShapesOfSmallModel) {
  const ModelConfig cfg = ModelConfig::parse(test::small_qwen2_config_json(false), "small");
  const auto m = tensor_manifest(cfg);
  ASSERT_EQ(m.size(), 1u + 2 * 12 + 2);
  EXPECT_EQ(m[0].name, "model.embed_tokens.weight");
  EXPECT_THAT(m[0].shape, ElementsAre(256, 64));
  EXPECT_EQ(m[1].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(m[4].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_THAT(m[4].shape, ElementsAre(32, 64));  // 2 KV heads x head dim 16
  EXPECT_EQ(m[7].name, "model.layers.0.self_attn.v_proj.bias");
  EXPECT_THAT(m[7].shape, ElementsAre(32));
  EXPECT_EQ(m[12].name, "model.layers.0.mlp.down_proj.weight");
  EXPECT_THAT(m[12].shape, ElementsAre(64, 160));
  EXPECT_EQ(m[13].name, "model.layers.1.input_layernorm.weight");
  EXPECT_EQ(m[25].name, "model.norm.weight");
  EXPECT_EQ(m[26].name, "lm_head.weight");
  EXPECT_TRUE(m[26].required);  // untied
  for (const auto& spec : m) EXPECT_EQ(spec.required, true) << spec.name;
}

TensorInfo info(const std::string& name, std::vector<uint64_t> shape) {
  TensorInfo t;
  t.name = name;
  t.dtype = DType::BF16;
  t.shape = std::move(shape);
  return t;
}

TEST(Manifest, ProblemsNameEachTensor) {
  const ModelConfig cfg = ModelConfig::parse(test::small_qwen2_config_json(true), "small");
  const auto m = tensor_manifest(cfg);
  std::vector<TensorInfo> tensors;
  for (const auto& spec : m)
    if (spec.required) tensors.push_back(info(spec.name, spec.shape));
  EXPECT_TRUE(manifest_problems(m, tensors).empty());

  // A tied model may still carry lm_head, if it has the right shape.
  tensors.push_back(info("lm_head.weight", {256, 64}));
  EXPECT_TRUE(manifest_problems(m, tensors).empty());
  tensors.back().shape = {256, 63};
  EXPECT_THAT(manifest_problems(m, tensors),
              ElementsAre("tensor 'lm_head.weight': expected shape [256, 64], found [256, 63]"));
  tensors.pop_back();

  tensors[4].shape = {32, 65};          // layer 0 k_proj.weight
  tensors.erase(tensors.begin() + 11);  // layer 0 up_proj.weight
  tensors.push_back(info("model.layers.2.mlp.up_proj.weight", {160, 64}));
  EXPECT_THAT(manifest_problems(m, tensors),
              ElementsAre("tensor 'model.layers.0.self_attn.k_proj.weight': expected shape "
                          "[32, 64], found [32, 65]",
                          "missing tensor 'model.layers.0.mlp.up_proj.weight' (expected shape "
                          "[160, 64])",
                          "unexpected tensor 'model.layers.2.mlp.up_proj.weight' (shape "
                          "[160, 64]) not in the manifest"));
}

}  // namespace
}  // namespace nanoinfer
