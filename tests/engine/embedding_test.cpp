// Embeddings against the float64 reference (tools/reference/embedding_reference.py): every
// pooling, normalisation and the Matryoshka cut, for Qwen3, Llama and Qwen2 tiny models, with
// the inputs batched and split across passes; the pooling read from a sentence-transformers
// directory and a GGUF file; a Qwen3-Embedding-shaped checkpoint (bare tensor names, no
// lm_head) from `synth --embedding`, loaded from both formats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "nanoinfer/embedding.h"
#include "nanoinfer/error.h"
#include "nanoinfer/gguf_export.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/synth.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/generation_model.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using EmbedRows = std::vector<std::vector<float>>;

// The float64 reference's tolerance: the engine's f32 forward stays within ~1e-6 of it on these
// models; normalised components are ~1/sqrt(hidden), and two poolings differ by far more.
constexpr float kEmbedTolerance = 2e-5f;

// embedding_reference.safetensors of one tiny model.
class EmbedReference {
 public:
  explicit EmbedReference(const fs::path& dir)
      : file_(SafetensorsFile::open(dir / "embedding_reference.safetensors")) {}
  size_t prompts() const {
    size_t k = 0;
    while (file_.find("prompt." + std::to_string(k)) != nullptr) ++k;
    return k;
  }
  std::vector<int32_t> prompt(size_t k) const { return read<int32_t>("prompt." + std::to_string(k)); }
  std::vector<float> vec(const std::string& what, size_t k) const {
    return read<float>(what + "." + std::to_string(k));
  }

 private:
  template <class T>
  std::vector<T> read(const std::string& name) const {
    const TensorView t = file_.get(name);
    std::vector<T> out(t.nbytes() / sizeof(T));
    std::memcpy(out.data(), t.data, t.nbytes());
    return out;
  }
  SafetensorsFile file_;
};

float embed_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

ModelOptions reference_options() {
  ModelOptions o;
  o.threads = 2;
  o.kv_type = DType::F32;  // the reference keeps K and V in f32
  return o;
}

std::vector<std::vector<int32_t>> reference_prompts(const EmbedReference& ref) {
  std::vector<std::vector<int32_t>> prompts;
  for (size_t k = 0; k < ref.prompts(); ++k) prompts.push_back(ref.prompt(k));
  return prompts;
}

TEST(Embedding, EveryPoolingMatchesTheFloat64Reference) {
  for (const char* name : {"tiny-qwen3", "tiny-llama", "tiny-gqa7"}) {
    SCOPED_TRACE(name);
    const fs::path dir = test::tiny_models_dir() / name;
    const EmbedReference ref(dir);
    const Model model = open_model_alone(dir, reference_options());
    const auto prompts = reference_prompts(ref);
    ASSERT_EQ(prompts.size(), 6u);
    const size_t hidden = static_cast<size_t>(model.config().hidden_size);
    for (const Pooling pooling : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
      const std::string what(pooling_name(pooling));
      // 24 rows a pass: the 32- and 64-token prompts are split across passes, the short ones
      // share them.
      const EmbedRows full = embed(model, prompts, {.pooling = pooling, .batch_rows = 24});
      const EmbedRows cut = embed(model, prompts, {.pooling = pooling, .dimensions = hidden / 4});
      for (size_t k = 0; k < prompts.size(); ++k) {
        EXPECT_LT(embed_max_diff(full[k], ref.vec(what, k)), kEmbedTolerance) << what << " prompt " << k;
        EXPECT_LT(embed_max_diff(cut[k], ref.vec(what + "_cut", k)), kEmbedTolerance) << what << " prompt " << k;
      }
    }
    const EmbedRows raw = embed(model, prompts, {.pooling = Pooling::Last, .normalize = false});
    for (size_t k = 0; k < prompts.size(); ++k)
      EXPECT_LT(embed_max_diff(raw[k], ref.vec("last_raw", k)), 4 * kEmbedTolerance) << "prompt " << k;
    // The tolerance separates the poolings: on the prompts of distinct tokens (1..4) every two
    // of them are far apart, so a wrong pooling cannot pass.
    for (size_t k = 1; k <= 4; ++k) {
      EXPECT_GT(embed_max_diff(ref.vec("mean", k), ref.vec("last", k)), 100 * kEmbedTolerance);
      EXPECT_GT(embed_max_diff(ref.vec("mean", k), ref.vec("cls", k)), 100 * kEmbedTolerance);
      EXPECT_GT(embed_max_diff(ref.vec("cls", k), ref.vec("last", k)), 100 * kEmbedTolerance);
    }
  }
}

// A sequence's rows are bitwise the same whatever rides beside them in a pass, so an input's
// embedding does not depend on the batch it came in or on how its rows were cut.
TEST(Embedding, TheBatchDoesNotChangeAnEmbedding) {
  const fs::path dir = test::tiny_models_dir() / "tiny-qwen3";
  const Model model = open_model_alone(dir, reference_options());
  const auto prompts = reference_prompts(EmbedReference(dir));
  for (const Pooling pooling : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    const EmbedRows together = embed(model, prompts, {.pooling = pooling});
    const EmbedRows split = embed(model, prompts, {.pooling = pooling, .batch_rows = 7});
    for (size_t k = 0; k < prompts.size(); ++k) {
      const EmbedRows alone = embed(model, {&prompts[k], 1}, {.pooling = pooling});
      EXPECT_TRUE(test::same_bits(alone[0], together[k])) << pooling_name(pooling) << " prompt " << k;
      EXPECT_TRUE(test::same_bits(alone[0], split[k])) << pooling_name(pooling) << " prompt " << k;
    }
  }
}

TEST(Embedding, BadInputsAreOneLineErrorsBeforeAnyWork) {
  ModelOptions o = reference_options();
  o.max_context = 16;
  const Model model = open_model_alone(test::tiny_models_dir() / "tiny-qwen3", o);
  const uint64_t before = model.positions_pushed();
  const std::vector<std::vector<int32_t>> empty{{1, 2}, {}};
  EXPECT_EQ(test::error_of([&] { embed(model, empty, {}); }), "input 1 is empty");
  const std::vector<std::vector<int32_t>> long_one{{1}, {2}, std::vector<int32_t>(17, 3)};
  EXPECT_EQ(test::error_of([&] { embed(model, long_one, {}); }), "input 2 is 17 tokens but the context holds 16");
  const std::vector<std::vector<int32_t>> outside{{1, 256}};
  EXPECT_EQ(test::error_of([&] { embed(model, outside, {}); }),
            "input 0: token id 256 is out of range for a vocabulary of 256");
  const std::vector<std::vector<int32_t>> fine{{1, 2}};
  EXPECT_EQ(test::error_of([&] { embed(model, fine, {.dimensions = 65}); }),
            "dimensions 65 exceeds the model's 64 (hidden size)");
  EXPECT_EQ(model.positions_pushed(), before);
  EXPECT_EQ(test::error_of([] { parse_pooling("max"); }), "pooling 'max': expected mean, cls (first token) or last");
  EXPECT_EQ(parse_pooling("first"), Pooling::Cls);
}

// tiny-llama laid out as a sentence-transformers checkpoint: tensors without "model.", a
// modules.json naming the Pooling module's directory, its config asking for `mode`, and the
// tiny tokenizer whose post-processor appends <|endoftext|> (297).
void write_sentence_transformers_dir(const fs::path& dir, const std::string& pool_dir, const std::string& mode) {
  const fs::path from = test::tiny_models_dir() / "tiny-llama";
  fs::create_directories(dir / pool_dir);
  fs::copy_file(from / "config.json", dir / "config.json");
  const SafetensorsFile src = SafetensorsFile::open(from / "model.safetensors");
  SafetensorsWriter writer(dir / "model.safetensors");
  for (const TensorInfo& t : src.tensors()) {
    const TensorView v = src.get(t.name);
    const std::string bare = t.name.starts_with("model.") ? t.name.substr(6) : t.name;
    writer.add(bare, t.dtype, t.shape, std::span<const std::byte>(v.data, v.nbytes()));
  }
  writer.write();
  test::write_text(
      dir / "modules.json",
      nlohmann::json::array({{{"idx", 0}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
                             {{"idx", 1}, {"path", pool_dir}, {"type", "sentence_transformers.models.Pooling"}}})
          .dump());
  test::write_text(dir / pool_dir / "config.json",
                   nlohmann::json{{"word_embedding_dimension", 128}, {"pooling_mode_" + mode, true}}.dump());
  nlohmann::json tok = nlohmann::json::parse(test::tiny_tokenizer_json());
  tok["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, {{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}}}},
      {"pair", nlohmann::json::array()},
      {"special_tokens",
       {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {297}}, {"tokens", {"<|endoftext|>"}}}}}}};
  test::write_text(dir / "tokenizer.json", tok.dump());
}

OpenedModel open_for_reference(const fs::path& path) {
  return open_model(path.string(), {.model = reference_options()});
}

TEST(Embedding, ASentenceTransformersDirectoryAndItsGgufCarryThePooling) {
  const test::TempDir tmp;
  write_sentence_transformers_dir(tmp / "st", "pool", "mean_tokens");
  const OpenedModel dir = open_for_reference(tmp / "st");
  ASSERT_EQ(dir.pooling.pooling, Pooling::Mean);
  EXPECT_EQ(dir.pooling.origin, (tmp / "st" / "pool/config.json").string());
  const std::vector<int32_t> tokens = embedding_tokens(dir.tokenizer, "the king");
  ASSERT_GE(tokens.size(), 2u);
  EXPECT_EQ(tokens.back(), 297);  // the post-processor's <|endoftext|>

  const EmbedReference ref(test::tiny_models_dir() / "tiny-llama");
  const auto prompts = reference_prompts(ref);
  const EmbedOptions options{.pooling = resolve_pooling(std::nullopt, dir.pooling)};
  const EmbedRows from_dir = embed(dir.model, prompts, options);
  for (size_t k = 0; k < prompts.size(); ++k)
    EXPECT_LT(embed_max_diff(from_dir[k], ref.vec("mean", k)), kEmbedTolerance);

  // The GGUF file: llama.pooling_type 1 (mean), add_eos_token with <|endoftext|>, the same
  // weights (its RoPE scaling travels as rope_freqs divisors, rounded to f32: not bitwise the
  // directory's frequencies, so held to the reference).
  export_gguf(tmp / "st", tmp / "st.gguf", std::nullopt);
  const OpenedModel gguf = open_for_reference(tmp / "st.gguf");
  ASSERT_EQ(gguf.pooling.pooling, Pooling::Mean);
  EXPECT_EQ(gguf.pooling.origin, (tmp / "st.gguf").string() + ": metadata 'llama.pooling_type'");
  EXPECT_EQ(embedding_tokens(gguf.tokenizer, "the king"), tokens);
  const EmbedRows from_gguf = embed(gguf.model, prompts, options);
  for (size_t k = 0; k < prompts.size(); ++k)
    EXPECT_LT(embed_max_diff(from_gguf[k], ref.vec("mean", k)), kEmbedTolerance) << k;

  // A flag wins over the files; a pooling the engine does not compute needs one.
  EXPECT_EQ(resolve_pooling(Pooling::Cls, dir.pooling), Pooling::Cls);
  write_sentence_transformers_dir(tmp / "max", "1_Pooling", "max_tokens");
  const OpenedModel max = open_for_reference(tmp / "max");
  EXPECT_FALSE(max.pooling.pooling.has_value());
  EXPECT_EQ(test::error_of([&] { resolve_pooling(std::nullopt, max.pooling); }),
            (tmp / "max" / "1_Pooling/config.json").string() +
                ": pooling_mode_max_tokens is not computed (mean, cls and last are) (choose one with --pooling)");
  // A generation model says nothing: last.
  EXPECT_EQ(resolve_pooling(std::nullopt, open_for_reference(test::default_model_dir()).pooling), Pooling::Last);
}

// The tiny Qwen3 config, tied (as Qwen3-Embedding-0.6B is) and with the tiny tokenizer's 300 ids.
fs::path tied_qwen3_config(const fs::path& dir) {
  nlohmann::json cfg = nlohmann::json::parse(test::read_text(test::tiny_models_dir() / "tiny-qwen3/config.json"));
  cfg["tie_word_embeddings"] = true;
  cfg["vocab_size"] = 300;
  fs::create_directories(dir);
  test::write_text(dir / "config.json", cfg.dump());
  test::write_text(dir / "tokenizer.json", test::tiny_tokenizer_json());
  return dir / "config.json";
}

TEST(Embedding, ASynthesizedQwen3EmbeddingCheckpointLoadsFromBothFormats) {
  const test::TempDir tmp;
  const fs::path config = tied_qwen3_config(tmp / "cfg");
  synth_model_dir(config, tmp / "emb",
                  {.seed = 7, .dtype = DType::F32, .embedding = true, .tokenizer_json = tmp / "cfg/tokenizer.json"});
  // Its layout: bare names, no lm_head, the sentence-transformers files.
  const SafetensorsFile file = SafetensorsFile::open(tmp / "emb/model.safetensors");
  EXPECT_NE(file.find("embed_tokens.weight"), nullptr);
  EXPECT_NE(file.find("layers.1.self_attn.q_norm.weight"), nullptr);
  EXPECT_NE(file.find("norm.weight"), nullptr);
  EXPECT_EQ(file.find("lm_head.weight"), nullptr);
  EXPECT_EQ(file.find("model.norm.weight"), nullptr);
  EXPECT_TRUE(fs::exists(tmp / "emb/modules.json"));

  const OpenedModel dir = open_for_reference(tmp / "emb");
  ASSERT_EQ(dir.pooling.pooling, Pooling::Last);
  const std::vector<int32_t> tokens = embedding_tokens(dir.tokenizer, "a query");
  EXPECT_EQ(tokens.back(), 297);
  export_gguf(tmp / "emb", tmp / "emb.gguf", std::nullopt);
  const OpenedModel gguf = open_for_reference(tmp / "emb.gguf");
  ASSERT_EQ(gguf.pooling.pooling, Pooling::Last);
  EXPECT_EQ(embedding_tokens(gguf.tokenizer, "a query"), tokens);
  const std::vector<std::vector<int32_t>> inputs{tokens, embedding_tokens(dir.tokenizer, "a longer document text")};
  const EmbedRows a = embed(dir.model, inputs, {.pooling = Pooling::Last});
  const EmbedRows b = embed(gguf.model, inputs, {.pooling = Pooling::Last});
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(test::same_bits(a[i], b[i])) << i;
    double norm = 0;
    for (const float v : a[i]) norm += static_cast<double>(v) * v;
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  EXPECT_EQ(test::error_of([&] {
              synth_model_dir(test::tiny_models_dir() / "tiny-qwen3/config.json", tmp / "untied", {.embedding = true});
            }),
            (test::tiny_models_dir() / "tiny-qwen3/config.json").string() +
                ": an embedding checkpoint has no lm_head; its config must tie the embeddings (tie_word_embeddings "
                "true)");
  EXPECT_FALSE(fs::exists(tmp / "untied"));
}

}  // namespace
}  // namespace nanoinfer
