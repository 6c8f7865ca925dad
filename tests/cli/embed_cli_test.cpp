// `nanoinfer synth --embedding` and `nanoinfer embed` run as a user runs them: a tiny
// Qwen3-Embedding-shaped checkpoint, its JSON lines equal to the library's embeddings, the
// flags, and one-line errors for bad input.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "nanoinfer/embedding.h"
#include "nanoinfer/open_model.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

using test::run_cli;

class EmbedCli : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json cfg = nlohmann::json::parse(test::read_text(test::tiny_models_dir() / "tiny-qwen3/config.json"));
    cfg["tie_word_embeddings"] = true;
    cfg["vocab_size"] = 300;
    test::write_text(tmp_ / "config.json", cfg.dump());
    test::write_text(tmp_ / "tokenizer.json", test::tiny_tokenizer_json());
    const auto r = run_cli({"synth", "--config", (tmp_ / "config.json").string(), "--out", model(), "--dtype", "f32",
                            "--embedding", "--tokenizer", (tmp_ / "tokenizer.json").string()});
    ASSERT_EQ(r.status, 0) << r.err;
  }
  std::string model() const { return (tmp_ / "emb").string(); }

  test::TempDir tmp_;
};

// The JSON lines of stdout.
std::vector<nlohmann::json> embed_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

double embed_norm(const nlohmann::json& e) {
  double s = 0;
  for (const auto& v : e) s += v.get<double>() * v.get<double>();
  return std::sqrt(s);
}

TEST_F(EmbedCli, OneJsonLinePerTextEqualToTheLibrary) {
  test::write_text(tmp_ / "texts.txt", "the king\nsaid nothing at all\r\nthe king\n");
  const auto r = run_cli({"embed", "-m", model(), "-f", (tmp_ / "texts.txt").string(), "-t", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lines = embed_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  const OpenedModel m = open_model(model(), {.model = {.threads = 1}});
  const std::vector<std::string> texts{"the king", "said nothing at all", "the king"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["index"], i);
    const std::vector<int32_t> tokens = embedding_tokens(m.tokenizer, texts[i]);
    EXPECT_EQ(tokens.back(), 297);  // <|endoftext|> from the post-processor synth wrote
    EXPECT_EQ(lines[i]["tokens"], tokens.size());
    const std::vector<float> want = embed(m.model, {&tokens, 1}, {.pooling = Pooling::Last})[0];
    EXPECT_EQ(lines[i]["embedding"].get<std::vector<float>>(), want) << i;  // printed to round-trip
  }
  EXPECT_EQ(lines[0]["embedding"], lines[2]["embedding"]);
  EXPECT_NE(r.err.find("embed: 3 texts, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("last pooling, 64 dimensions"), std::string::npos) << r.err;

  // -p, and stdin, give the same line.
  const auto one = run_cli({"embed", "-m", model(), "-p", "said nothing at all", "-t", "1"});
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(embed_lines(one.out)[0]["embedding"], lines[1]["embedding"]);
  const auto piped = run_cli({"embed", "-m", model(), "-t", "1", "--batch", "1"}, "the king\nsaid nothing at all\n");
  ASSERT_EQ(piped.status, 0) << piped.err;
  ASSERT_EQ(embed_lines(piped.out).size(), 2u);
  EXPECT_EQ(embed_lines(piped.out)[1]["embedding"], lines[1]["embedding"]);
}

TEST_F(EmbedCli, DimensionsNormalizationAndPooling) {
  const auto base = embed_lines(run_cli({"embed", "-m", model(), "-p", "the king", "-t", "1"}).out).at(0)["embedding"];
  const auto cut = run_cli({"embed", "-m", model(), "-p", "the king", "--dimensions", "16", "-t", "1"});
  ASSERT_EQ(cut.status, 0) << cut.err;
  const auto e = embed_lines(cut.out).at(0)["embedding"];
  ASSERT_EQ(e.size(), 16u);
  EXPECT_NEAR(embed_norm(e), 1.0, 1e-6);
  // The cut keeps the direction of the first 16 components.
  double scale = 0;
  for (size_t d = 0; d < 16; ++d) scale += base[d].get<double>() * base[d].get<double>();
  for (size_t d = 0; d < 16; ++d) EXPECT_NEAR(e[d].get<double>(), base[d].get<double>() / std::sqrt(scale), 1e-6);

  const auto raw = run_cli({"embed", "-m", model(), "-p", "the king", "--no-normalize", "-t", "1"});
  ASSERT_EQ(raw.status, 0) << raw.err;
  EXPECT_GT(std::abs(embed_norm(embed_lines(raw.out).at(0)["embedding"]) - 1.0), 0.1);
  const auto mean = run_cli({"embed", "-m", model(), "-p", "the king", "--pooling", "mean", "-t", "1"});
  ASSERT_EQ(mean.status, 0) << mean.err;
  EXPECT_NE(embed_lines(mean.out).at(0)["embedding"], base);
  EXPECT_NE(mean.err.find("mean pooling"), std::string::npos) << mean.err;
}

// A quantized copy of an embedding checkpoint (its bare tensor names) keeps the file's naming
// and its pooling: here mean, set in the checkpoint's 1_Pooling/config.json, not the default last.
TEST_F(EmbedCli, QuantizedCopyKeepsItsPoolingAndEmbedsClose) {
  nlohmann::json pooling = nlohmann::json::parse(test::read_text(tmp_ / "emb/1_Pooling/config.json"));
  pooling["pooling_mode_lasttoken"] = false;
  pooling["pooling_mode_mean_tokens"] = true;
  test::write_text(tmp_ / "emb/1_Pooling/config.json", pooling.dump());
  const std::string q8 = (tmp_ / "emb-int8").string();
  const auto q = run_cli({"quantize", "-m", model(), "--type", "int8", "--method", "rtn", "--out", q8, "-t", "1"});
  ASSERT_EQ(q.status, 0) << q.err;
  EXPECT_TRUE(std::filesystem::exists(tmp_ / "emb-int8/1_Pooling/config.json"));
  const auto text = std::vector<std::string>{"-p", "said nothing at all", "-t", "1"};
  auto args = [&](const std::string& m, std::vector<std::string> extra) {
    std::vector<std::string> a{"embed", "-m", m};
    a.insert(a.end(), text.begin(), text.end());
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const auto mean = embed_lines(run_cli(args(model(), {})).out).at(0)["embedding"];
  const auto last = embed_lines(run_cli(args(model(), {"--pooling", "last"})).out).at(0)["embedding"];
  const auto quantized = embed_lines(run_cli(args(q8, {})).out).at(0)["embedding"];
  auto cosine = [](const nlohmann::json& a, const nlohmann::json& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i].get<double>() * b[i].get<double>();
    return s / (embed_norm(a) * embed_norm(b));
  };
  ASSERT_EQ(quantized.size(), mean.size());
  EXPECT_NE(quantized, mean);  // int8 weights: close, not equal
  EXPECT_GT(cosine(quantized, mean), 0.999);
  EXPECT_LT(cosine(mean, last), 0.99);  // the other pooling would be told apart
}

TEST_F(EmbedCli, BadInputIsOneLineError) {
  test::expect_error_exactly(run_cli({"embed", "-m", model(), "-p", "x", "--pooling", "max"}),
                             "pooling 'max': expected mean, cls (first token) or last");
  test::expect_error_exactly(run_cli({"embed", "-m", model(), "-p", "x", "--dimensions", "65"}),
                             "--dimensions 65: the model's embeddings have 64");
  test::expect_error_exactly(run_cli({"embed", "-m", model()}, ""),
                             "no text to embed (give -p TEXT, or lines on -f FILE or stdin)");
  test::expect_error_exactly(run_cli({"embed", "-m", model(), "-p", "x", "--batch", "0"}),
                             "--batch must be at least 1");
  test::expect_one_line_error(run_cli({"embed", "-m", (tmp_ / "missing").string(), "-p", "x"}), "missing");
  // -c 8: the text that does not fit is named.
  const size_t long_tokens = embedding_tokens(open_tokenizer(model()), "this text is longer than eight").size();
  test::expect_error_exactly(run_cli({"embed", "-m", model(), "-c", "8"}, "short\nthis text is longer than eight\n"),
                             fmt::format("text 1 is {} tokens but the context holds 8", long_tokens));
  test::expect_one_line_error(
      run_cli({"synth", "--config", (test::tiny_models_dir() / "tiny-qwen3/config.json").string(), "--out",
               (tmp_ / "untied").string(), "--embedding"}),
      "its config must tie the embeddings");
}

}  // namespace
}  // namespace nanoinfer
