// End-to-end tests of `nanoinfer synth` and `nanoinfer inspect`: run the built binary on a
// small synthetic model and on corrupted copies of it, and check exit codes and messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/safetensors.h"
#include "nanoinfer/synth.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `nanoinfer <args>` with stdout and stderr captured into files in `dir`.
RunResult run_nanoinfer(const test::TempDir& dir, const std::string& args) {
  const auto out = dir / "stdout.txt";
  const auto err = dir / "stderr.txt";
  const std::string cmd =
      std::string("'") + NANOINFER_BINARY_PATH + "' " + args + " >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = test::read_text(out);
  r.err = test::read_text(err);
  return r;
}

// A small model directory written once for the whole suite; corrupted copies derive from it.
class InspectCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new test::TempDir();
    const test::TempDir source;
    test::write_text(source / "config.json", test::small_qwen2_config_json());
    synth_model_dir(source / "config.json", model_->path(), SynthOptions{.seed = 7});
    bytes_ = new std::vector<std::byte>(test::read_bytes(*model_ / "model.safetensors"));
  }
  static void TearDownTestSuite() {
    delete bytes_;
    delete model_;
  }

  // Writes a model dir whose model.safetensors is `bytes`, runs inspect on it and returns
  // the result after checking it failed with exactly one error line.
  RunResult inspect_corrupt(const std::vector<std::byte>& bytes) {
    test::write_text(dir_ / "m/config.json", test::small_qwen2_config_json());
    test::write_bytes(dir_ / "m/model.safetensors", bytes);
    RunResult r = run_nanoinfer(dir_, "inspect '" + (dir_ / "m").string() + "'");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, StartsWith("nanoinfer: error: "));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    return r;
  }

  // The good file with its header JSON edited by `edit` (data section unchanged).
  static std::vector<std::byte> with_header(const std::function<void(Json&)>& edit) {
    const SafetensorsLayout layout = parse_safetensors(*bytes_, "good");
    const std::string text(reinterpret_cast<const char*>(bytes_->data()) + 8, layout.header_len);
    Json header = Json::parse(text);
    edit(header);
    return with_header_text(header.dump());
  }
  static std::vector<std::byte> with_header_text(const std::string& text) {
    const SafetensorsLayout layout = parse_safetensors(*bytes_, "good");
    std::vector<std::byte> out = test::raw_safetensors(text, 0);
    out.insert(out.end(), bytes_->begin() + static_cast<std::ptrdiff_t>(layout.data_offset), bytes_->end());
    return out;
  }

  void SetUp() override { std::filesystem::create_directories(dir_ / "m"); }

  test::TempDir dir_;
  static test::TempDir* model_;
  static std::vector<std::byte>* bytes_;  // the good model.safetensors
};

test::TempDir* InspectCli::model_ = nullptr;
std::vector<std::byte>* InspectCli::bytes_ = nullptr;

TEST_F(InspectCli, SynthThenInspectPasses) {
  test::write_text(dir_ / "config.json", test::small_qwen2_config_json());
  const RunResult s = run_nanoinfer(
      dir_, "synth --config '" + (dir_ / "config.json").string() + "' --out '" + (dir_ / "m").string() + "' --seed 7");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  // stderr is a file, not a terminal: no progress lines, only the summary
  // on stdout.
  EXPECT_EQ(s.err, "");
  EXPECT_THAT(s.out, HasSubstr("/model.safetensors: "));
  // Same seed through the CLI and through the library: the same bytes.
  EXPECT_EQ(test::read_bytes(dir_ / "m/model.safetensors"), *bytes_);
  EXPECT_EQ(test::read_text(dir_ / "m/config.json"), test::small_qwen2_config_json());

  const RunResult r = run_nanoinfer(dir_, "inspect '" + (dir_ / "m").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // 256x64 embedding, 2 layers of (q/o 64x64, k/v 32x64, biases 64+32+32, MLP 3x160x64,
  // two norms of 64), final norm 64.
  EXPECT_THAT(r.out, HasSubstr("parameters: 102,976\n"));
  EXPECT_THAT(r.out, HasSubstr("embeddings         16,384   15.91%"));
  EXPECT_THAT(r.out, HasSubstr("mlp                61,440   59.66%"));
  EXPECT_THAT(r.out, HasSubstr("model.layers.1.mlp.down_proj.weight"));
  EXPECT_THAT(r.out, HasSubstr("verdict: OK, all 26 tensors match"));
}

TEST_F(InspectCli, SynthValuesFollowTheRecipe) {
  const SafetensorsFile f = SafetensorsFile::open(*model_ / "model.safetensors");
  ASSERT_EQ(f.tensors().size(), 26u);
  const auto moments = [&](std::string_view name) {
    const TensorView v = f.get(name);
    EXPECT_EQ(v.dtype(), DType::BF16);
    double sum = 0, sum2 = 0;
    const size_t n = v.nbytes() / 2;
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, v.data + 2 * i, 2);
      const double x = bf16_to_f32(h);
      sum += x;
      sum2 += x * x;
    }
    const double mean = sum / static_cast<double>(n);
    return std::pair(mean, std::sqrt(sum2 / static_cast<double>(n) - mean * mean));
  };
  // 16,384 samples: the standard error of the std is ~0.6%, of the mean ~0.00016.
  const auto [emb_mean, emb_std] = moments("model.embed_tokens.weight");
  EXPECT_NEAR(emb_mean, 0.0, 0.001);
  EXPECT_NEAR(emb_std, 0.02, 0.0006);
  const auto [norm_mean, norm_std] = moments("model.norm.weight");  // 64 samples
  EXPECT_NEAR(norm_mean, 1.0, 0.01);
  EXPECT_GT(norm_std, 0.01);
  EXPECT_LT(norm_std, 0.03);
  // Different seeds give different weights; the tensors differ from each other too.
  write_synthetic_weights(ModelConfig::parse(test::small_qwen2_config_json(), "small"), dir_ / "other.safetensors",
                          SynthOptions{.seed = 8});
  EXPECT_NE(test::read_bytes(dir_ / "other.safetensors"), *bytes_);
  const TensorView g = f.get("model.layers.0.mlp.gate_proj.weight");
  const TensorView u = f.get("model.layers.0.mlp.up_proj.weight");
  EXPECT_NE(std::memcmp(g.data, u.data, g.nbytes()), 0);
}

TEST_F(InspectCli, TruncatedFile) {
  std::vector<std::byte> b = *bytes_;
  b.erase(b.end() - 100, b.end());  // not resize(): false GCC 12 -O1 warning
  EXPECT_THAT(inspect_corrupt(b).err,
              HasSubstr("tensor 'model.norm.weight': data_offsets [205824, 205952] run past the "
                        "end of the data section (205852 bytes)"));
}

TEST_F(InspectCli, HeaderLengthPastEnd) {
  std::vector<std::byte> b = *bytes_;
  b[3] = std::byte{0x01};  // + 16 MiB
  EXPECT_THAT(inspect_corrupt(b).err, HasSubstr("runs past the end of the file"));
}

TEST_F(InspectCli, EmptyFile) {
  EXPECT_THAT(inspect_corrupt({}).err, HasSubstr("model.safetensors: file is empty"));
}

TEST_F(InspectCli, NonJsonHeader) {
  const SafetensorsLayout layout = parse_safetensors(*bytes_, "good");
  EXPECT_THAT(inspect_corrupt(with_header_text(std::string(layout.header_len, '#'))).err,
              HasSubstr("header is not valid JSON"));
}

TEST_F(InspectCli, UnknownDtype) {
  const auto b = with_header([](Json& h) { h["model.norm.weight"]["dtype"] = "Q4_K"; });
  EXPECT_THAT(inspect_corrupt(b).err, HasSubstr("tensor 'model.norm.weight': unknown dtype \"Q4_K\""));
}

TEST_F(InspectCli, WrongByteLength) {
  const auto b = with_header([](Json& h) { h["model.norm.weight"]["shape"] = {65}; });
  EXPECT_THAT(inspect_corrupt(b).err,
              HasSubstr("tensor 'model.norm.weight': shape [65] BF16 needs 130 bytes, found 128"));
}

TEST_F(InspectCli, OverlappingOffsets) {
  const auto b = with_header([](Json& h) {
    // Point the final norm at the first 128 bytes of the embedding.
    h["model.norm.weight"]["data_offsets"] = {0, 128};
  });
  EXPECT_THAT(inspect_corrupt(b).err,
              HasSubstr("tensor 'model.embed_tokens.weight' at bytes [0, 32768] overlaps tensor "
                        "'model.norm.weight' at [0, 128]"));
}

TEST_F(InspectCli, OffsetsOutsideFile) {
  const auto b = with_header([](Json& h) { h["model.norm.weight"]["data_offsets"] = {1 << 30, (1 << 30) + 128}; });
  EXPECT_THAT(inspect_corrupt(b).err, HasSubstr("tensor 'model.norm.weight': data_offsets [1073741824, 1073741952] run "
                                                "past the end of the data section"));
}

TEST_F(InspectCli, DuplicateTensor) {
  const SafetensorsLayout layout = parse_safetensors(*bytes_, "good");
  std::string text(reinterpret_cast<const char*>(bytes_->data()) + 8, layout.header_len);
  text.insert(1, R"("model.norm.weight":{"dtype":"BF16","shape":[0],"data_offsets":[0,0]},)");
  EXPECT_THAT(inspect_corrupt(with_header_text(text)).err, HasSubstr("duplicate tensor 'model.norm.weight'"));
}

TEST_F(InspectCli, MissingTensor) {
  const auto b = with_header([](Json& h) { h.erase("model.layers.1.mlp.up_proj.weight"); });
  EXPECT_THAT(inspect_corrupt(b).err, HasSubstr("missing tensor 'model.layers.1.mlp.up_proj.weight' (expected shape "
                                                "[160, 64])"));
}

TEST_F(InspectCli, UnexpectedTensor) {
  const auto b = with_header([](Json& h) {
    h["model.layers.0.mlp.extra.weight"] = {{"dtype", "BF16"}, {"shape", {0}}, {"data_offsets", {0, 0}}};
  });
  const RunResult r = inspect_corrupt(b);
  EXPECT_THAT(r.err, HasSubstr("unexpected tensor 'model.layers.0.mlp.extra.weight'"));
  EXPECT_THAT(r.out, HasSubstr("verdict: FAIL, 1 problem(s)"));
}

TEST_F(InspectCli, MisShapedTensor) {
  // Transposed: same byte length, so only the manifest can catch it.
  const auto b = with_header([](Json& h) { h["model.layers.1.mlp.down_proj.weight"]["shape"] = {160, 64}; });
  EXPECT_THAT(inspect_corrupt(b).err,
              HasSubstr("tensor 'model.layers.1.mlp.down_proj.weight': expected shape [64, 160], "
                        "found [160, 64]"));
}

TEST_F(InspectCli, SeveralProblemsReportTheFirstAndCount) {
  const auto b = with_header([](Json& h) {
    h.erase("model.norm.weight");
    h.erase("model.embed_tokens.weight");
  });
  EXPECT_THAT(inspect_corrupt(b).err, HasSubstr("missing tensor 'model.embed_tokens.weight' (expected shape [256, 64]) "
                                                "(and 1 more problem(s) listed above)"));
}

TEST_F(InspectCli, MissingFilesAndBadConfig) {
  RunResult r = run_nanoinfer(dir_, "inspect '" + (dir_ / "m").string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("m/config.json: not found"));
  EXPECT_THAT(r.err, HasSubstr("nanoinfer synth"));

  test::write_text(dir_ / "m/config.json", test::small_qwen2_config_json());
  r = run_nanoinfer(dir_, "inspect '" + (dir_ / "m").string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("m/model.safetensors: not found"));
  EXPECT_THAT(r.err, HasSubstr("nanoinfer pull Qwen/Qwen2.5-0.5B-Instruct"));

  auto cfg = nlohmann::json::parse(test::small_qwen2_config_json());
  cfg["use_sliding_window"] = true;
  test::write_text(dir_ / "m/config.json", cfg.dump());
  test::write_bytes(dir_ / "m/model.safetensors", *bytes_);
  r = run_nanoinfer(dir_, "inspect '" + (dir_ / "m").string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("use_sliding_window=true is not supported"));
}

TEST_F(InspectCli, SynthF32AndBadDtype) {
  const std::string cfg = (dir_ / "config.json").string();
  test::write_text(cfg, test::small_qwen2_config_json(false));
  RunResult r = run_nanoinfer(dir_, "synth --config '" + cfg + "' --out '" + (dir_ / "f").string() + "' --dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_nanoinfer(dir_, "inspect '" + (dir_ / "f").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Untied: lm_head [256, 64] is stored and counted on its own line.
  EXPECT_THAT(r.out, HasSubstr("parameters: 119,360\n"));
  EXPECT_THAT(r.out, HasSubstr("lm_head            16,384"));
  EXPECT_THAT(r.out, HasSubstr("dtypes: F32 x27"));

  r = run_nanoinfer(dir_, "synth --config '" + cfg + "' --out '" + (dir_ / "g").string() + "' --dtype f16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "nanoinfer: error: --dtype f16: expected bf16 or f32\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "g/model.safetensors"));
}

TEST_F(InspectCli, BenchLoadAppendsOneRecord) {
  const auto results = dir_ / "results.jsonl";
  for (int i = 0; i < 2; ++i) {
    const RunResult r = run_nanoinfer(
        dir_, "bench load -m '" + model_->path().string() + "' -t 2 --runs 2 -o '" + results.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("(bf16 weights, "));
    EXPECT_THAT(r.out, HasSubstr("peak resident"));
  }
  std::istringstream lines(test::read_text(results));
  std::string line;
  int records = 0;
  while (std::getline(lines, line)) {
    const auto rec = nlohmann::json::parse(line);
    EXPECT_EQ(rec.at("bench"), "load");
    EXPECT_EQ(rec.at("threads"), 2);
    EXPECT_EQ(rec.at("weight_type"), "bf16");
    // The bf16 file's matrices are held as stored (2 bytes a weight); its 576 norm and bias
    // weights are widened to f32: 102,976 * 2 + 576 * 2.
    EXPECT_EQ(rec.at("weight_bytes"), 102976u * 2 + 576u * 2);
    EXPECT_EQ(rec.at("runs"), 2);
    EXPECT_EQ(rec.at("load_seconds").size(), 2u);
    EXPECT_GT(rec.at("peak_rss_bytes").get<uint64_t>(), 102976u * 4);
    ++records;
  }
  EXPECT_EQ(records, 2);

  // A model that fails inspect is not benchmarked.
  test::write_text(dir_ / "m/config.json", test::small_qwen2_config_json(false));
  test::write_bytes(dir_ / "m/model.safetensors", *bytes_);
  const RunResult r =
      run_nanoinfer(dir_, "bench load -m '" + (dir_ / "m").string() + "' -o '" + results.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("missing tensor 'lm_head.weight'"));
}

// The full-size synthetic Qwen2.5-0.5B: ~1 GB written, so only on request.
TEST_F(InspectCli, FullSizeQwen25SynthPasses) {
  const char* long_tests = std::getenv("NANOINFER_LONG_TESTS");
  if (long_tests == nullptr || std::string(long_tests) != "1")
    GTEST_SKIP() << "writes ~1 GB; set NANOINFER_LONG_TESTS=1 to run";
  const RunResult s = run_nanoinfer(
      dir_, "synth --config '" + test::qwen25_config_path().string() + "' --out '" + (dir_ / "q").string() + "'");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("942.3 MiB of bf16 tensors"));
  const RunResult r = run_nanoinfer(dir_, "inspect '" + (dir_ / "q").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("parameters: 494,032,768\n"));
  EXPECT_THAT(r.out, HasSubstr("tensor data: 988,065,536 bytes (942.3 MiB); dtypes: BF16 x290"));
  EXPECT_THAT(r.out, HasSubstr("verdict: OK, all 290 tensors match"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "q/generation_config.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "q/tokenizer_config.json"));
}

}  // namespace
}  // namespace nanoinfer
