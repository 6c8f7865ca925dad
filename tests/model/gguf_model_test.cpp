// GGUF as a model source: the qwen2 config, tensor names, and the tokenizer.ggml.* vocabulary,
// whose ids must equal the tokenizer.json ones on the whole tokenizer reference corpus.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/gguf_config.h"
#include "nanoinfer/error.h"
#include "support/files.h"
#include "support/tokenizer_corpus.h"
#include "tokenizer/tokenizer_gguf.h"

namespace nanoinfer {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
namespace fs = std::filesystem;

// Qwen2.5-0.5B's hyperparameters as llama.cpp's converter writes them, with a token_embd of
// [896, vocab] F32 (its data is not read).
struct Qwen2File {
  test::TempDir dir;
  std::vector<std::byte> embd;
  uint64_t vocab = 64;

  GgufLayout write(const std::function<void(GgufWriter&)>& edit = {}) {
    GgufWriter w(dir / "m.gguf");
    w.set_string("general.architecture", "qwen2");
    w.set_u32("qwen2.block_count", 24);
    w.set_u32("qwen2.context_length", 32768);
    w.set_u32("qwen2.embedding_length", 896);
    w.set_u32("qwen2.feed_forward_length", 4864);
    w.set_u32("qwen2.attention.head_count", 14);
    w.set_u32("qwen2.attention.head_count_kv", 2);
    w.set_f32("qwen2.rope.freq_base", 1000000.0f);
    w.set_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
    embd.assign(896 * vocab * 4, std::byte{0});
    if (edit) edit(w);
    w.add("token_embd.weight", ggml_type_of(WeightType::F32), {896, vocab}, embd);
    w.write();
    return GgufFile::open(dir / "m.gguf").layout();
  }
};

TEST(GgufConfig, Qwen25HyperparametersMap) {
  Qwen2File f;
  const ModelConfig c = config_from_gguf(f.write());
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.vocab_size, 64);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.rope_theta, 1000000.0);
  EXPECT_EQ(c.rms_norm_eps, static_cast<double>(1e-6f));  // widened exactly from f32
  EXPECT_TRUE(c.tie_word_embeddings);                     // no output.weight
  EXPECT_EQ(c.head_dim(), 64);
}

TEST(GgufConfig, UntiedWhenOutputWeightPresentAndDefaults) {
  Qwen2File f;
  std::vector<std::byte> out(896 * 64 * 4);
  const ModelConfig c = config_from_gguf(f.write([&](GgufWriter& w) {
    w.add("output.weight", ggml_type_of(WeightType::F32), {896, 64}, out);
    w.set("qwen2.attention.head_count_kv", {uint64_t{14}});  // u64 is accepted too
  }));
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_key_value_heads, 14);
}

TEST(GgufConfig, RejectsOtherArchitecturesAndBadValues) {
  auto error = [](const std::function<void(GgufWriter&)>& edit) {
    Qwen2File f;
    const GgufLayout layout = f.write(edit);
    try {
      config_from_gguf(layout);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(
      error([](GgufWriter& w) { w.set_string("general.architecture", "gemma3"); }),
      HasSubstr("m.gguf: general.architecture 'gemma3' is not supported (nanoinfer supports 'qwen2' (Qwen2 / Qwen2.5), "
                "'qwen3' (Qwen3, dense), 'llama' (Llama 3.x))"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_u32("qwen2.attention.head_count_kv", 3); }),
              HasSubstr("qwen2.attention.head_count 14 is not divisible by qwen2.attention.head_count_kv 3"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_u32("qwen2.block_count", 0); }),
              HasSubstr("metadata 'qwen2.block_count': expected an integer in [1, 1024], found 0"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_string("qwen2.embedding_length", "896"); }),
              HasSubstr("metadata 'qwen2.embedding_length': expected a non-negative integer, found string"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_u32("qwen2.vocab_size", 65); }),
              HasSubstr("metadata 'qwen2.vocab_size' 65 differs from the 64 rows of token_embd.weight"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_u32("qwen2.rope.dimension_count", 32); }),
              HasSubstr("'qwen2.rope.dimension_count' 32 differs"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_string("qwen2.rope.scaling.type", "yarn"); }),
              HasSubstr("RoPE scaling is not supported"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_f32("qwen2.attention.layer_norm_rms_epsilon", -1.0f); }),
              HasSubstr("expected a positive number, found -1"));
  // The same range checks as config.json (an eps of 1e30 would generate "\f\f\f...", a
  // freq_base of inf is no frequency).
  EXPECT_THAT(error([](GgufWriter& w) { w.set_f32("qwen2.attention.layer_norm_rms_epsilon", 1e30f); }),
              HasSubstr("metadata 'qwen2.attention.layer_norm_rms_epsilon': expected a small positive number in "
                        "(0, 0.01], found 1.0000000150474662e+30"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_f32("qwen2.rope.freq_base", std::numeric_limits<float>::infinity()); }),
              HasSubstr("metadata 'qwen2.rope.freq_base': expected a number in [1, 1000000000000], found inf"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_f32("qwen2.rope.freq_base", std::nanf("")); }),
              HasSubstr("metadata 'qwen2.rope.freq_base': expected a positive number, found nan"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_u32("qwen2.block_count", 100000); }),
              HasSubstr("metadata 'qwen2.block_count': expected an integer in [1, 1024], found 100000"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set("qwen2.context_length", {uint64_t{1} << 40}); }),
              HasSubstr("metadata 'qwen2.context_length': expected an integer in [1, 16777216], found 1099511627776"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_u32("qwen2.feed_forward_length", 1u << 30); }),
              HasSubstr("metadata 'qwen2.feed_forward_length': expected an integer in [1, 262144]"));
  EXPECT_THAT(error([](GgufWriter& w) { w.set_array("tokenizer.ggml.tokens", {std::vector<std::string>(63, "x")}); }),
              HasSubstr("'tokenizer.ggml.tokens' has 63 tokens, token_embd.weight 64 rows"));
}

TEST(GgufNames, MapBothWays) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.23.attn_q.bias", "model.layers.23.self_attn.q_proj.bias"},
      {"blk.5.attn_k.weight", "model.layers.5.self_attn.k_proj.weight"},
      {"blk.5.attn_v.bias", "model.layers.5.self_attn.v_proj.bias"},
      {"blk.10.attn_output.weight", "model.layers.10.self_attn.o_proj.weight"},
      {"blk.1.ffn_norm.weight", "model.layers.1.post_attention_layernorm.weight"},
      {"blk.1.ffn_gate.weight", "model.layers.1.mlp.gate_proj.weight"},
      {"blk.1.ffn_up.weight", "model.layers.1.mlp.up_proj.weight"},
      {"blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight"},
      {"blk.3.attn_q_norm.weight", "model.layers.3.self_attn.q_norm.weight"},  // Qwen3
      {"blk.3.attn_k_norm.weight", "model.layers.3.self_attn.k_norm.weight"},
      {"rope_freqs.weight", "rope_freqs.weight"},  // Llama 3's RoPE divisors: GGUF only, one name
  };
  for (const auto& [gguf, hf] : pairs) {
    EXPECT_EQ(hf_name_from_gguf(gguf), hf);
    EXPECT_EQ(gguf_name_from_hf(hf), gguf);
  }
  for (const char* bad : {"blk.01.attn_q.weight", "blk..attn_q.weight", "blk.x.attn_q.weight", "blk.1.attn_o.weight",
                          "rope_freqs.bias", "blk.1"})
    EXPECT_EQ(hf_name_from_gguf(bad), std::nullopt) << bad;
  EXPECT_EQ(gguf_name_from_hf("model.layers.1.self_attn.rotary_emb.inv_freq"), std::nullopt);
}

// ---- tokenizer ------------------------------------------------------------------------------

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string() + " (run scripts/fetch-test-assets.sh)");
  std::ostringstream s;
  s << in.rdbuf();
  return std::move(s).str();
}

const fs::path kTokenizerDir = fs::path(NANOINFER_SOURCE_DIR) / ".deps" / "qwen-tokenizer";

// tokenizer.json turned into the tokenizer.ggml.* arrays the way llama.cpp's converter does:
// ids padded to the model's vocab with "[PADn]" (unused), vocabulary tokens normal, added
// tokens control when special or spelled <|...|>, user-defined otherwise, merges "a b".
struct GgufVocabArrays {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
};

GgufVocabArrays convert_like_llama_cpp(const std::string& tokenizer_json, size_t padded_vocab) {
  const auto j = nlohmann::json::parse(tokenizer_json);
  GgufVocabArrays a;
  a.tokens.resize(padded_vocab);
  a.types.assign(padded_vocab, 5);
  for (size_t i = 0; i < padded_vocab; ++i) a.tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [spelling, id] : j["model"]["vocab"].items()) {
    a.tokens.at(id.get<size_t>()) = spelling;
    a.types[id.get<size_t>()] = 1;
  }
  for (const auto& t : j["added_tokens"]) {
    const auto id = t["id"].get<size_t>();
    const auto content = t["content"].get<std::string>();
    const bool looks_special = content.starts_with("<|") && content.ends_with("|>");
    a.tokens.at(id) = content;
    a.types[id] = t["special"].get<bool>() || looks_special ? 3 : 4;
  }
  for (const auto& m : j["model"]["merges"])
    a.merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  return a;
}

TEST(GgufTokenizer, SameIdsAsTokenizerJsonOnTheReferenceCorpus) {
  const std::string json = read_file(kTokenizerDir / "tokenizer.json");
  const std::string config = read_file(kTokenizerDir / "tokenizer_config.json");
  const Tokenizer from_json = Tokenizer::from_json(json, config, "tokenizer.json");
  const GgufVocabArrays arrays = convert_like_llama_cpp(json, 151936);

  // Through a real file: writer -> reader -> tokenizer_from_gguf.
  test::TempDir dir;
  GgufWriter w(dir / "tok.gguf");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_array("tokenizer.ggml.tokens", {arrays.tokens});
  w.set_array("tokenizer.ggml.token_type", {arrays.types});
  w.set_array("tokenizer.ggml.merges", {arrays.merges});
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*from_json.eos_token_id()));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*from_json.pad_token_id()));
  w.write();
  const GgufFile file = GgufFile::open(dir / "tok.gguf");
  const Tokenizer from_gguf = tokenizer_from_gguf(file.layout());

  EXPECT_EQ(from_gguf.vocab_size(), from_json.vocab_size());  // [PADn] ids are no tokens
  EXPECT_EQ(from_gguf.eos_token_id(), from_json.eos_token_id());
  EXPECT_EQ(from_gguf.pad_token_id(), from_json.pad_token_id());
  EXPECT_EQ(from_gguf.token_id("<|im_end|>"), from_json.token_id("<|im_end|>"));
  EXPECT_EQ(from_gguf.token_id("Ġthe"), from_json.token_id("Ġthe"));
  EXPECT_TRUE(from_gguf.is_special_token(*from_json.token_id("<|im_start|>")));
  EXPECT_FALSE(from_gguf.is_special_token(*from_json.token_id("<think>")));
  EXPECT_TRUE(from_gguf.is_added_token(*from_json.token_id("<think>")));
  EXPECT_THROW(from_gguf.decode(std::vector<int32_t>{151935}), Error);

  std::vector<std::string> corpus = test::adversarial_corpus();
  corpus.push_back(read_file(fs::path(NANOINFER_SOURCE_DIR) / "data" / "tinyshakespeare.txt"));
  size_t mismatches = 0;
  for (const std::string& text : corpus) {
    const auto want = from_json.encode(text);
    const auto got = from_gguf.encode(text);
    if (got != want && ++mismatches <= 5) ADD_FAILURE() << "ids differ for a " << text.size() << "-byte string";
    if (got == want) {
      EXPECT_EQ(from_gguf.decode(got), from_json.decode(want));
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << corpus.size() << " strings";
}

TEST(GgufTokenizer, RejectsWhatItDoesNotReproduce) {
  // A tiny byte-level vocabulary: the 256 single bytes, "ab", merge "a b".
  std::vector<std::string> tokens;
  const std::vector<int> byte_of = [] {
    std::vector<int> cp_of_byte(256);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      cp_of_byte[b] = printable ? b : next++;
    }
    return cp_of_byte;
  }();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    const int cp = byte_of[b];
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    tokens.push_back(s);
  }
  tokens.push_back("ab");
  tokens.push_back("<|im_end|>");
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  std::vector<std::string> merges = {"a b"};

  TokenizerVocab v{tokens, types, merges, "qwen2", 257, std::nullopt};
  const Tokenizer tok = Tokenizer::from_vocab(v, "tiny");
  EXPECT_EQ(tok.encode("abab<|im_end|>x"), (std::vector<int32_t>{256, 256, 257, 'x'}));

  auto error = [&](TokenizerVocab bad) {
    try {
      Tokenizer::from_vocab(bad, "tiny");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TokenizerVocab gpt4o = v;
  gpt4o.pre = "gpt-4o";
  EXPECT_EQ(error(gpt4o), "tokenizer 'tiny': pre-tokenizer 'gpt-4o' is not supported (supported: qwen2, llama-bpe)");
  std::vector<std::string> bad_merges = {"a  b"};
  TokenizerVocab merge = v;
  merge.merges = bad_merges;
  EXPECT_EQ(error(merge), "tokenizer 'tiny': merge 0 ('a  b') is not two tokens separated by one space");
  std::vector<std::string> missing_merges = {"a c"};
  merge.merges = missing_merges;
  EXPECT_EQ(error(merge), "tokenizer 'tiny': merge 0 uses 'ac', which is not in the vocabulary");
  std::vector<int32_t> byte_type = types;
  byte_type[5] = 6;
  TokenizerVocab typed = v;
  typed.token_types = byte_type;
  EXPECT_THAT(error(typed), HasSubstr("token 5 has type 6 (supported: 1 normal, 3 control"));
  std::vector<int32_t> short_types(types.begin(), types.end() - 1);
  typed.token_types = short_types;
  EXPECT_EQ(error(typed), "tokenizer 'tiny': 258 tokens but 257 token types");
  TokenizerVocab eos = v;
  eos.eos_id = 9999;
  EXPECT_EQ(error(eos), "tokenizer 'tiny': eos token id 9999 is not a token");

  test::TempDir dir;
  GgufWriter w(dir / "t.gguf");
  w.set_string("tokenizer.ggml.model", "llama");
  w.write();
  EXPECT_THAT([&] { tokenizer_from_gguf(GgufFile::open(dir / "t.gguf").layout()); },
              ThrowsMessage<Error>(HasSubstr("tokenizer.ggml.model 'llama' is not supported (supported: gpt2")));
}

}  // namespace
}  // namespace nanoinfer
