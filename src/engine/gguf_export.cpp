// export_gguf: a model directory written as one GGUF file llama.cpp loads (nanoinfer/engine.h).
// The metadata is what llama.cpp's converter writes for a Qwen2 checkpoint (architecture
// "qwen2", its hyperparameters, the GPT-2-style tokenizer arrays with pre-tokenizer "qwen2");
// matrices in the requested type, norms and biases in f32. Tensors are converted one at a time,
// so memory holds at most one of them beside the writer.
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf_writer.h"
#include "model/gguf_config.h"
#include "model/linear.h"
#include "model/manifest.h"
#include "model/quant_scheme.h"
#include "model/weight_source.h"
#include "nanoinfer/engine.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

GgmlType ggml_type_of(WeightType t) {
  switch (t) {
    case WeightType::F32: return GgmlType::F32;
    case WeightType::BF16: return GgmlType::BF16;
    case WeightType::Q8_0: return GgmlType::Q8_0;
    case WeightType::Q4_0: return GgmlType::Q4_0;
  }
  fail("export: no GGUF type for {}", weight_type_name(t));
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return std::move(s).str();
}

// tokenizer.json as the tokenizer.ggml.* arrays: ids padded to the embedding rows with
// "[PADn]" (type 5, unused), vocabulary tokens normal (1), added tokens control (3) when
// special or spelled <|...|>, user-defined (4) otherwise; merges as "left right".
void set_tokenizer(GgufWriter& w, const std::filesystem::path& dir, size_t padded_vocab, const Tokenizer& tok) {
  const std::filesystem::path path = dir / "tokenizer.json";
  const auto j = nlohmann::json::parse(read_text(path), nullptr, false);
  if (j.is_discarded()) fail("{}: not valid JSON", path.string());
  std::vector<std::string> tokens(padded_vocab);
  std::vector<int32_t> types(padded_vocab, 5);
  for (size_t i = 0; i < padded_vocab; ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [spelling, id] : j.at("model").at("vocab").items()) {
    const size_t i = id.get<size_t>();
    if (i >= padded_vocab) fail("{}: token id {} is past the model's {} embedding rows", path.string(), i, padded_vocab);
    tokens[i] = spelling;
    types[i] = 1;
  }
  for (const auto& t : j.at("added_tokens")) {
    const size_t i = t.at("id").get<size_t>();
    if (i >= padded_vocab) fail("{}: token id {} is past the model's {} embedding rows", path.string(), i, padded_vocab);
    const auto content = t.at("content").get<std::string>();
    tokens[i] = content;
    types[i] = t.at("special").get<bool>() || (content.starts_with("<|") && content.ends_with("|>")) ? 3 : 4;
  }
  std::vector<std::string> merges;
  for (const auto& m : j.at("model").at("merges")) {
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_array("tokenizer.ggml.tokens", {std::move(tokens)});
  w.set_array("tokenizer.ggml.token_type", {std::move(types)});
  w.set_array("tokenizer.ggml.merges", {std::move(merges)});
  if (const auto eos = tok.eos_token_id()) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*eos));
  if (const auto pad = tok.pad_token_id()) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*pad));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
}

}  // namespace

uint64_t export_gguf(const std::filesystem::path& model_dir, const std::filesystem::path& out_file,
                     std::optional<WeightType> type) {
  const ModelFiles files = locate_model(model_dir);
  const ModelConfig cfg = ModelConfig::load(files.config);
  const Tokenizer tok = Tokenizer::load(files.dir);
  const SafetensorsFile file = SafetensorsFile::open(files.weights);
  const WeightSource src = safetensors_source(file);
  const std::vector<TensorSpec> manifest = tensor_manifest(cfg);
  if (const auto problems = manifest_problems(manifest, src.manifest_infos, src.declared_blocks); !problems.empty()) {
    fail("{}: {}", files.weights.string(), problems.front());
  }

  GgufWriter w(out_file);
  w.set_string("general.architecture", "qwen2");
  w.set_string("general.name", files.dir.filename().string());
  w.set_u32("qwen2.block_count", static_cast<uint32_t>(cfg.num_hidden_layers));
  w.set_u32("qwen2.context_length", static_cast<uint32_t>(cfg.max_position_embeddings));
  w.set_u32("qwen2.embedding_length", static_cast<uint32_t>(cfg.hidden_size));
  w.set_u32("qwen2.feed_forward_length", static_cast<uint32_t>(cfg.intermediate_size));
  w.set_u32("qwen2.attention.head_count", static_cast<uint32_t>(cfg.num_attention_heads));
  w.set_u32("qwen2.attention.head_count_kv", static_cast<uint32_t>(cfg.num_key_value_heads));
  w.set_f32("qwen2.rope.freq_base", static_cast<float>(cfg.rope_theta));
  w.set_f32("qwen2.attention.layer_norm_rms_epsilon", static_cast<float>(cfg.rms_norm_eps));
  set_tokenizer(w, files.dir, static_cast<size_t>(cfg.vocab_size), tok);

  for (const TensorSpec& spec : manifest) {
    const StoredTensor* t = src.find(spec.name);
    if (t == nullptr || (spec.slot == TensorSlot::LmHead && cfg.tie_word_embeddings)) continue;
    if (!t->widen_row) fail("{}: tensor '{}': cannot export {}", files.weights.string(), spec.name, t->type_name);
    // A quantized type follows the engine's scheme (the tied embedding / LM head stays int8),
    // so the file holds exactly what `--dtype` at load would hold.
    WeightType to = WeightType::F32;
    if (spec.is_matrix()) {
      to = type.value_or(t->exact.value_or(WeightType::F32));
      if (type && weight_type_info(*type).quantized) to = scheme_type(spec, *type, cfg.tie_word_embeddings);
    }
    const size_t rows = spec.is_matrix() ? static_cast<size_t>(spec.shape[0]) : 1;
    const size_t cols = static_cast<size_t>(spec.shape.back());
    const size_t row_bytes = weight_row_bytes(to, cols);
    std::vector<uint64_t> dims(spec.shape.rbegin(), spec.shape.rend());
    // The converted tensor is built on the writer's first request and handed out in chunks.
    auto converted = std::make_shared<std::vector<std::byte>>();
    auto pos = std::make_shared<size_t>(0);
    const StoredTensor* stored = t;
    const WeightSource* source = &src;
    w.add(*gguf_name_from_hf(spec.name), ggml_type_of(to), std::move(dims), [=](std::span<std::byte> chunk) {
      if (converted->empty()) {
        converted->resize(rows * row_bytes);
        std::vector<std::byte> staged(stored->row_bytes);
        std::vector<float> row(cols);
        for (size_t r = 0; r < rows; ++r) {
          source->read(*stored, r * stored->row_bytes, staged);
          stored->widen_row(staged.data(), row.data(), cols);
          encode_row(to, row.data(), converted->data() + r * row_bytes, cols);
        }
      }
      std::copy_n(converted->data() + *pos, chunk.size(), chunk.data());
      *pos += chunk.size();
      if (*pos == converted->size()) std::vector<std::byte>().swap(*converted);
    });
  }
  w.write();
  return w.data_bytes();
}

}  // namespace nanoinfer
