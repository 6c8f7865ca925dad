// The same model as safetensors and as a GGUF file written by export_gguf gives bitwise the
// same logits: weights held as f32, int8 (Q8_0) and int4 (Q4_0); and the GGUF tokenizer
// encodes like tokenizer.json.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "nanoinfer/engine.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

std::vector<float> logits_of(const OpenedModel& m, const std::vector<int32_t>& tokens) {
  Sequence seq = m.model.new_sequence();
  const auto out = m.model.forward(tokens, seq, true);
  return {out.begin(), out.end()};
}

TEST(GgufRoundTrip, DefaultModelLogitsBitwiseAsSafetensors) {
  test::TempDir dir;
  for (const WeightType type : {WeightType::F32, WeightType::Q8_0, WeightType::Q4_0}) {
    const auto file = dir / (std::string(weight_type_name(type)) + ".gguf");
    export_gguf(default_model_dir(), file, type);
    OpenOptions opts;
    opts.model.threads = 2;
    opts.model.weights = type;
    const OpenedModel st = open_model(default_model_dir().string(), opts);
    opts.model.weights.reset();  // the file's own types
    const OpenedModel gg = open_model(file.string(), opts);
    EXPECT_EQ(gg.model.weight_type(), type);
    const std::vector<int32_t> ids = st.tokenizer.encode("ROMEO:\nWhat light through yonder window breaks?");
    EXPECT_EQ(gg.tokenizer.encode("ROMEO:\nWhat light through yonder window breaks?"), ids);
    const auto a = logits_of(st, ids), b = logits_of(gg, ids);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << weight_type_name(type);
  }
}

}  // namespace
}  // namespace nanoinfer
