// The architectures beside Qwen2.5-0.5B: every supported family's and size's config (parameter
// counts and shapes, from the configs alone: no GBs of weights), the refusals, and that the
// differences of Qwen3 and Llama matter (a config without Llama's RoPE scaling, or without
// Qwen3's head_dim, is caught against the float64 reference), and Qwen3 / Llama GGUF files
// (llama.cpp's naming, Llama's permuted q/k rows and rope_freqs tensor) giving the logits of
// their Hugging Face directories. The forward of each against the float64 reference runs in
// model_test.cpp over tests/data/models/tiny-qwen3 and tiny-llama.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "model/manifest.h"
#include "model/ops.h"
#include "nanoinfer/config.h"
#include "nanoinfer/error.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/tokenizer.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path source(std::string_view rel) {
  return fs::path(NANOINFER_SOURCE_DIR) / rel;
}

const TensorSpec* find(const std::vector<TensorSpec>& m, std::string_view name) {
  for (const TensorSpec& t : m)
    if (t.name == name) return &t;
  return nullptr;
}

// The counts are those of tools/reference/qwen2_reference.py's own manifest (an independent
// Python listing of the Hugging Face tensors) over the same config files; the Qwen2.5 ones are
// also the published totals (the 7B's with its vocabulary of 152,064: with 151,936 it would be
// 7,614,699,008).
TEST(Architectures, ParameterCountsOfEveryConfig) {
  struct Case {
    const char* dir;
    uint64_t params;
    size_t tensors;
    const char* model_type;
  };
  for (const Case& c :
       {Case{"data/qwen2.5-0.5b-instruct", 494'032'768, 290, "qwen2"},
        Case{"data/qwen2.5-1.5b-instruct", 1'543'714'304, 338, "qwen2"},
        Case{"data/qwen2.5-3b-instruct", 3'085'938'688, 434, "qwen2"},
        Case{"data/qwen2.5-7b-instruct", 7'615'616'512, 339, "qwen2"},
        Case{"data/qwen3-0.6b", 596'049'920, 310, "qwen3"}, Case{"data/llama-3.2-1b", 1'235'814'400, 146, "llama"}}) {
    const ModelConfig cfg = ModelConfig::load(source(c.dir) / "config.json");
    EXPECT_EQ(cfg.model_type, c.model_type) << c.dir;
    EXPECT_EQ(cfg.parameter_count(), c.params) << c.dir;
    size_t required = 0;
    for (const TensorSpec& t : tensor_manifest(cfg)) required += t.required ? 1 : 0;
    EXPECT_EQ(required, c.tensors) << c.dir;
  }
}

TEST(Architectures, ShapesFollowEachArchitecture) {
  // Qwen3-0.6B: head_dim 128 from the config, not 1024 / 16; per-head q/k norms, no biases.
  const ModelConfig q3 = ModelConfig::load(source("data/qwen3-0.6b/config.json"));
  EXPECT_EQ(q3.architecture, Architecture::Qwen3);
  EXPECT_EQ(q3.head_dim(), 128);
  EXPECT_EQ(q3.q_dim(), 2048);
  const auto m3 = tensor_manifest(q3);
  ASSERT_NE(find(m3, "model.layers.5.self_attn.q_proj.weight"), nullptr);
  EXPECT_EQ(find(m3, "model.layers.5.self_attn.q_proj.weight")->shape, (std::vector<uint64_t>{2048, 1024}));
  EXPECT_EQ(find(m3, "model.layers.5.self_attn.k_proj.weight")->shape, (std::vector<uint64_t>{1024, 1024}));
  EXPECT_EQ(find(m3, "model.layers.5.self_attn.o_proj.weight")->shape, (std::vector<uint64_t>{1024, 2048}));
  ASSERT_NE(find(m3, "model.layers.5.self_attn.q_norm.weight"), nullptr);
  EXPECT_EQ(find(m3, "model.layers.5.self_attn.k_norm.weight")->shape, (std::vector<uint64_t>{128}));
  EXPECT_EQ(find(m3, "model.layers.5.self_attn.q_norm.weight")->gguf_name, "blk.5.attn_q_norm.weight");
  EXPECT_EQ(find(m3, "model.layers.5.self_attn.q_proj.bias"), nullptr);
  EXPECT_EQ(find(m3, "rope_freqs.weight"), nullptr);

  // Llama 3.2-1B: no biases or q/k norms, the llama3 RoPE scaling, an optional rope_freqs.
  const ModelConfig ll = ModelConfig::load(source("data/llama-3.2-1b/config.json"));
  EXPECT_EQ(ll.architecture, Architecture::Llama);
  EXPECT_EQ(ll.head_dim(), 64);
  ASSERT_TRUE(ll.rope_scaling.has_value());
  EXPECT_EQ(ll.rope_scaling->factor, 32.0);
  EXPECT_EQ(ll.rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(ll.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(ll.rope_scaling->original_max_position_embeddings, 8192);
  const auto ml = tensor_manifest(ll);
  EXPECT_EQ(find(ml, "model.layers.0.self_attn.q_proj.bias"), nullptr);
  EXPECT_EQ(find(ml, "model.layers.0.self_attn.q_norm.weight"), nullptr);
  ASSERT_NE(find(ml, "rope_freqs.weight"), nullptr);
  EXPECT_FALSE(find(ml, "rope_freqs.weight")->required);
  EXPECT_EQ(find(ml, "rope_freqs.weight")->shape, (std::vector<uint64_t>{32}));
  EXPECT_FALSE(find(ml, "lm_head.weight")->required);  // tied

  // Qwen2.5-7B: an untied head; 28 heads over 4 KV heads.
  const ModelConfig q7 = ModelConfig::load(source("data/qwen2.5-7b-instruct/config.json"));
  const auto m7 = tensor_manifest(q7);
  EXPECT_TRUE(find(m7, "lm_head.weight")->required);
  EXPECT_EQ(find(m7, "model.layers.27.self_attn.k_proj.weight")->shape, (std::vector<uint64_t>{512, 3584}));
  EXPECT_EQ(find(m7, "model.layers.27.self_attn.q_proj.bias")->shape, (std::vector<uint64_t>{3584}));
}

std::string parse_error(const fs::path& config, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(test::read_text(config));
  edit(j);
  try {
    ModelConfig::parse(j.dump(), "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Architectures, RefusesWhatTheForwardDoesNotImplement) {
  const fs::path q3 = source("data/qwen3-0.6b/config.json"), ll = source("data/llama-3.2-1b/config.json");
  EXPECT_EQ(parse_error(q3, [](auto&) {}), "");
  EXPECT_EQ(parse_error(ll, [](auto&) {}), "");
  EXPECT_THAT(parse_error(q3, [](auto& j) { j["attention_bias"] = true; }),
              HasSubstr("attention_bias=true is not supported for qwen3"));
  EXPECT_THAT(parse_error(q3, [](auto& j) { j["head_dim"] = 127; }), HasSubstr("field \"head_dim\": 127 must be even"));
  EXPECT_THAT(parse_error(q3,
                          [](auto& j) {
                            j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
                          }),
              HasSubstr("rope_scaling {\"factor\":8.0,\"rope_type\":\"llama3\"} is not supported (qwen3 takes none)"));
  EXPECT_THAT(parse_error(ll, [](auto& j) { j["rope_scaling"]["rope_type"] = "yarn"; }),
              HasSubstr("is not supported (llama takes null or type \"llama3\")"));
  EXPECT_THAT(parse_error(ll, [](auto& j) { j["rope_scaling"].erase("low_freq_factor"); }),
              HasSubstr("rope_scaling: missing required field \"low_freq_factor\""));
  EXPECT_THAT(parse_error(ll, [](auto& j) { j["rope_scaling"]["high_freq_factor"] = 1.0; }),
              HasSubstr("expected factor in [1, 1024], 1 <= low_freq_factor < high_freq_factor <= 1024"));
  EXPECT_THAT(parse_error(ll, [](auto& j) { j["mlp_bias"] = true; }), HasSubstr("mlp_bias=true is not supported"));
}

// Llama 3's tokenizer_config.json has model_max_length = int(1e30), an integer beyond 64 bits;
// it is read (as a double, unused) and the rest of the file applies.
TEST(Architectures, TokenizerConfigWithABigIntegerLoads) {
  const std::string json = test::read_text(test::default_model_dir() / "tokenizer.json");
  const Tokenizer tok = Tokenizer::from_json(
      json, R"({"model_max_length": 1000000000000000019884624838656, "f": 0.12345678901234567890123,
               "e": 1.5e-3, "chat_template": "{{ '<|start_header_id|>' }}", "s": "12345678901234567890123"})",
      "t");
  EXPECT_EQ(tok.chat_format(), ChatFormat::Llama3);
}

// ---- the differences matter: wrong variants are caught against the float64 reference -------

std::vector<float> read_floats(const SafetensorsFile& f, const std::string& name) {
  const TensorView t = f.get(name);
  std::vector<float> out(t.nbytes() / sizeof(float));
  std::memcpy(out.data(), t.data, t.nbytes());
  return out;
}

std::vector<int32_t> read_ints(const SafetensorsFile& f, const std::string& name) {
  const TensorView t = f.get(name);
  std::vector<int32_t> out(t.nbytes() / sizeof(int32_t));
  std::memcpy(out.data(), t.data, t.nbytes());
  return out;
}

Model load(const fs::path& path) {
  ModelOptions o;
  o.threads = 2;
  o.weights = WeightType::F32;
  o.kv_type = DType::F32;
  return open_model_alone(path, o);
}

// Largest |logit - reference| over every position of the reference's 64-token prompt.
float error_vs_reference(const Model& m, const fs::path& ref_dir) {
  const SafetensorsFile ref = SafetensorsFile::open(ref_dir / "reference.safetensors");
  const std::vector<int32_t> prompt = read_ints(ref, "prompt.4");
  const std::vector<float> want = read_floats(ref, "logits.4");
  Sequence s = m.new_sequence();
  const auto got = m.forward(prompt, s, true);
  EXPECT_EQ(got.size(), want.size());
  float worst = 0.0f;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

// A copy of a tiny model directory with its config edited.
fs::path edited_copy(const test::TempDir& dir, std::string_view model,
                     const std::function<void(nlohmann::json&)>& edit) {
  const fs::path from = source("tests/data/models") / model, to = dir / model;
  fs::create_directories(to);
  fs::copy_file(from / "model.safetensors", to / "model.safetensors");
  auto j = nlohmann::json::parse(test::read_text(from / "config.json"));
  edit(j);
  test::write_text(to / "config.json", j.dump());
  return to;
}

TEST(Architectures, LlamaRopeScalingIsWhatTheReferenceNeeds) {
  const fs::path tiny = source("tests/data/models/tiny-llama");
  EXPECT_LE(error_vs_reference(load(tiny), tiny), 1e-4f);
  // The same weights with plain RoPE: the low frequencies turn 32x faster, and the 64-token
  // prompt's logits move far past the tolerance.
  test::TempDir dir;
  const fs::path plain = edited_copy(dir, "tiny-llama", [](auto& j) { j.erase("rope_scaling"); });
  EXPECT_GT(error_vs_reference(load(plain), tiny), 1e-2f);
}

TEST(Architectures, Qwen3HeadDimComesFromTheConfig) {
  // hidden / heads = 16 instead of head_dim 32: the file's q_proj no longer fits.
  test::TempDir dir;
  const fs::path derived = edited_copy(dir, "tiny-qwen3", [](auto& j) { j.erase("head_dim"); });
  EXPECT_THAT([&] { load(derived); }, ::testing::ThrowsMessage<Error>(
                                          HasSubstr("tensor 'model.layers.0.self_attn.q_proj.weight': expected shape "
                                                    "[64, 64], found [128, 64]")));
}

// ---- GGUF: a Qwen3 and a Llama directory written the way llama.cpp's converter does ---------

// Writes `model_dir` as an F32 GGUF file: `arch`'s metadata, llama.cpp's tensor names, and for
// Llama the q/k rows permuted for adjacent-pair RoPE (row t * d/2 + j of a head stored at row
// 2j + t) and, when `rope_freqs`, the scaling as divisors (plain / scaled frequency).
void write_gguf(const fs::path& model_dir, const fs::path& out, bool llama_layout, bool rope_freqs,
                std::vector<std::vector<std::byte>>& keep) {
  const ModelConfig cfg = ModelConfig::load(model_dir / "config.json");
  const SafetensorsFile st = SafetensorsFile::open(model_dir / "model.safetensors");
  GgufWriter w(out);
  const std::string a = cfg.model_type;
  w.set_string("general.architecture", a);
  w.set_u32(a + ".block_count", static_cast<uint32_t>(cfg.num_hidden_layers));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(cfg.max_position_embeddings));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(cfg.hidden_size));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(cfg.intermediate_size));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(cfg.num_attention_heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(cfg.num_key_value_heads));
  w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(cfg.head_dim()));
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(cfg.head_dim()));
  w.set_f32(a + ".rope.freq_base", static_cast<float>(cfg.rope_theta));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(cfg.rms_norm_eps));
  const size_t d = static_cast<size_t>(cfg.head_dim());
  for (const TensorInfo& t : st.tensors()) {
    const TensorView v = st.view(t);
    std::vector<std::byte> bytes(v.data, v.data + v.nbytes());
    const bool qk = t.name.ends_with("q_proj.weight") || t.name.ends_with("k_proj.weight");
    if (llama_layout && qk) {
      const size_t row_bytes = t.shape[1] * sizeof(float);
      for (size_t r = 0; r < t.shape[0]; ++r) {
        const size_t in_head = r % d, hf_row = r - in_head + (in_head % 2) * (d / 2) + in_head / 2;
        std::memcpy(bytes.data() + r * row_bytes, v.data + hf_row * row_bytes, row_bytes);
      }
    }
    std::vector<uint64_t> dims(t.shape.rbegin(), t.shape.rend());
    keep.push_back(std::move(bytes));
    w.add(*gguf_name_from_hf(t.name), ggml_type_of(WeightType::F32), dims, keep.back());
  }
  if (rope_freqs) {
    const auto plain = rope_inv_freq(d, cfg.rope_theta, std::nullopt);
    const auto scaled = rope_inv_freq(d, cfg.rope_theta, cfg.rope_scaling);
    std::vector<float> f(d / 2);
    for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(plain[i] / scaled[i]);
    std::vector<std::byte> bytes(f.size() * sizeof(float));
    std::memcpy(bytes.data(), f.data(), bytes.size());
    keep.push_back(std::move(bytes));
    w.add("rope_freqs.weight", ggml_type_of(WeightType::F32), {f.size()}, keep.back());
  }
  w.write();
}

std::vector<float> logits(const Model& m, const std::vector<int32_t>& tokens) {
  Sequence s = m.new_sequence();
  const auto out = m.forward(tokens, s, true);
  return {out.begin(), out.end()};
}

TEST(Architectures, Qwen3GgufBitwiseAsItsDirectory) {
  test::TempDir dir;
  std::vector<std::vector<std::byte>> keep;
  const fs::path tiny = source("tests/data/models/tiny-qwen3");
  write_gguf(tiny, dir / "q3.gguf", false, false, keep);
  const Model from_dir = load(tiny), from_gguf = load(dir / "q3.gguf");
  EXPECT_EQ(from_gguf.config().architecture, Architecture::Qwen3);
  EXPECT_EQ(from_gguf.config().head_dim(), 32);
  EXPECT_FALSE(from_gguf.config().tie_word_embeddings);
  const std::vector<int32_t> ids{1, 17, 200, 3, 99, 42, 42, 7};
  const auto a = logits(from_dir, ids), b = logits(from_gguf, ids);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(Architectures, LlamaGgufPermutedRowsAndRopeFreqs) {
  test::TempDir dir;
  std::vector<std::vector<std::byte>> keep;
  const fs::path tiny = source("tests/data/models/tiny-llama");
  write_gguf(tiny, dir / "ll.gguf", true, true, keep);
  const Model from_gguf = load(dir / "ll.gguf");
  EXPECT_EQ(from_gguf.config().architecture, Architecture::Llama);
  EXPECT_FALSE(from_gguf.config().rope_scaling.has_value());  // carried by rope_freqs.weight
  // The divisors are f32: the frequencies differ from the config's by a rounding, so the
  // logits by far less than the reference's tolerance.
  EXPECT_LE(error_vs_reference(from_gguf, tiny), 1e-4f);
  // Without the divisors (plain RoPE), or with the rows left in Hugging Face's order, the
  // logits move far past it.
  write_gguf(tiny, dir / "no-freqs.gguf", true, false, keep);
  EXPECT_GT(error_vs_reference(load(dir / "no-freqs.gguf"), tiny), 1e-2f);
  write_gguf(tiny, dir / "unpermuted.gguf", false, true, keep);
  EXPECT_GT(error_vs_reference(load(dir / "unpermuted.gguf"), tiny), 1e-2f);
}

}  // namespace
}  // namespace nanoinfer
