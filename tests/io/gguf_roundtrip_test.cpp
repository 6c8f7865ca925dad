// The same model as safetensors and as a GGUF file written by export_gguf gives bitwise the
// same logits: weights held as f32, int8 (Q8_0), int4 (Q4_0) and the types only llama.cpp's
// files bring (Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: such a file's matrices stay blocks of their
// type, packed where the ISA has a packed product); and the GGUF tokenizer encodes like
// tokenizer.json.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "io/gguf.h"
#include "kernels/kernels.h"
#include "model/gguf_config.h"
#include "model/weight_source.h"
#include "model/weights.h"
#include "nanoinfer/gguf_export.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/thread_pool.h"
#include "support/files.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

std::vector<float> logits_of(const OpenedModel& m, const std::vector<int32_t>& tokens) {
  Sequence seq = m.model.new_sequence();
  const auto out = m.model.forward(tokens, seq, true);
  return {out.begin(), out.end()};
}

TEST(GgufRoundTrip, DefaultModelLogitsBitwiseAsSafetensors) {
  test::TempDir dir;
  std::vector<WeightType> types = {WeightType::F32, WeightType::Q8_0, WeightType::Q4_0};
  for (const WeightTypeInfo& info : all_weight_types())
    if (info.quantized && !info.scaled_blocks()) types.push_back(info.type);  // the types only files bring
  ASSERT_EQ(types.size(), 10u);  // the K types fit: default model rows are 256 and 512
  for (const WeightType type : types) {
    const auto file = dir / (std::string(weight_type_name(type)) + ".gguf");
    export_gguf(test::default_model_dir(), file, type);
    OpenOptions opts;
    opts.model.threads = 2;
    opts.model.weights = type;
    const OpenedModel st = open_model(test::default_model_dir().string(), opts);
    opts.model.weights.reset();  // the file's own types
    const OpenedModel gg = open_model(file.string(), opts);
    EXPECT_EQ(gg.model.weight_type(), type);
    const std::vector<int32_t> ids = st.tokenizer.encode("ROMEO:\nWhat light through yonder window breaks?");
    EXPECT_EQ(gg.tokenizer.encode("ROMEO:\nWhat light through yonder window breaks?"), ids);
    const auto a = logits_of(st, ids), b = logits_of(gg, ids);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << weight_type_name(type);
    EXPECT_EQ(gg.model.weight_bytes(), st.model.weight_bytes()) << weight_type_name(type);
    // The file's blocks as loaded: of its own type, packed where the best ISA packs that type.
    const GgufFile f = GgufFile::open(file);
    ThreadPool pool(1);
    const kernels::Kernels& k = kernels::table(best_isa());
    const ModelWeights w = load_weights(gguf_source(f), config_from_gguf(f.layout()), std::nullopt, pool, true, &k);
    EXPECT_EQ(w.layers[0].o.type, type);
    EXPECT_EQ(w.layers[0].o.row_bytes, weight_row_bytes(type, 256));
    EXPECT_EQ(w.layers[0].o.packed, k.packs(type, 256, 256)) << weight_type_name(type);
  }
}

// `tokenize -m FILE.gguf` reads only the file's tokenizer and prints the directory's ids.
TEST(GgufRoundTrip, TokenizeTakesAGgufFile) {
  test::TempDir dir;
  const auto file = dir / "model.gguf";
  export_gguf(test::default_model_dir(), file, WeightType::Q8_0);
  const std::string text = "ROMEO:\nWhat light through yonder window breaks?";
  const test::CliResult from_dir = test::run_cli({"tokenize", "-m", test::default_model_dir().string(), "-p", text});
  const test::CliResult from_gguf = test::run_cli({"tokenize", "-m", file.string(), "-p", text});
  ASSERT_EQ(from_dir.status, 0) << from_dir.err;
  ASSERT_EQ(from_gguf.status, 0) << from_gguf.err;
  EXPECT_EQ(from_gguf.out, from_dir.out);
  EXPECT_GT(from_dir.out.size(), 4u);  // some ids were printed
  const test::CliResult missing = test::run_cli({"tokenize", "-m", (dir / "absent.gguf").string(), "-p", text});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("absent.gguf: no such GGUF file"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace nanoinfer
