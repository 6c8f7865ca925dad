// export_gguf and quantize_to_gguf: a model directory written as one GGUF file llama.cpp loads
// (nanoinfer/gguf_export.h). The metadata is what llama.cpp's converter writes for a Qwen2, Qwen3
// or Llama checkpoint (general.architecture, its `{arch}.*` hyperparameters, the GPT-2-style
// tokenizer arrays with pre-tokenizer "qwen2" or "llama-bpe", the chat template, general.file_type;
// for Llama the q/k rows permuted and rope_freqs.weight); matrices in the requested type, norms and
// biases in f32. A tensor already stored in its target type is copied byte for byte (a quantized
// directory's blocks are never requantized); any other is converted one tensor at a time, so memory
// holds at most one of them beside the writer.
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/output_files.h"
#include "engine/default_model.h"
#include "engine/model_pooling.h"
#include "engine/model_source.h"
#include "io/gguf_writer.h"
#include "model/gguf_config.h"
#include "model/linear.h"
#include "model/manifest.h"
#include "model/ops.h"
#include "model/quant_scheme.h"
#include "model/weight_source.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/gguf_export.h"
#include "nanoinfer/json_limits.h"
#include "nanoinfer/model_files.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

// A JSON object file of the model directory; an empty object when the file is absent.
nlohmann::json read_json_object(const ModelSource& src, std::string_view name) {
  const std::optional<std::string> text = src.read_text(name, kMaxConfigFileBytes);
  if (!text) return nlohmann::json::object();
  auto j = parse_json(*text, src.path_of(name).string());
  if (!j.is_object()) fail("{}: not a JSON object", src.path_of(name).string());
  return j;
}

// tokenizer.json (its text) as the tokenizer.ggml.* arrays: ids padded to the embedding rows
// with "[PADn]" (type 5, unused), vocabulary tokens normal (1), added tokens control (3) when
// special or spelled <|...|>, user-defined (4) otherwise; merges as "left right".
void set_tokenizer(GgufWriter& w, const ModelSource& src, std::string_view tokenizer_json, size_t padded_vocab,
                   const Tokenizer& tok, bool llama) {
  const fs::path path = src.path_of("tokenizer.json");
  const auto j = parse_json(tokenizer_json, path.string());
  std::vector<std::string> tokens(padded_vocab);
  std::vector<int32_t> types(padded_vocab, 5);
  for (size_t i = 0; i < padded_vocab; ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [spelling, id] : j.at("model").at("vocab").items()) {
    const size_t i = id.get<size_t>();
    if (i >= padded_vocab)
      fail("{}: token id {} is past the model's {} embedding rows", path.string(), i, padded_vocab);
    tokens[i] = spelling;
    types[i] = 1;
  }
  for (const auto& t : j.at("added_tokens")) {
    const size_t i = t.at("id").get<size_t>();
    if (i >= padded_vocab)
      fail("{}: token id {} is past the model's {} embedding rows", path.string(), i, padded_vocab);
    const auto content = t.at("content").get<std::string>();
    tokens[i] = content;
    types[i] = t.at("special").get<bool>() || (content.starts_with("<|") && content.ends_with("|>")) ? 3 : 4;
  }
  std::vector<std::string> merges;
  for (const auto& m : j.at("model").at("merges")) {
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", llama ? "llama-bpe" : "qwen2");
  w.set_array("tokenizer.ggml.tokens", {std::move(tokens)});
  w.set_array("tokenizer.ggml.token_type", {std::move(types)});
  w.set_array("tokenizer.ggml.merges", {std::move(merges)});
  // An embedding model whose post-processor appends one token (Qwen3-Embedding's <|endoftext|>)
  // carries it as the EOS with add_eos_token, as llama.cpp's converter writes it.
  const std::span<const int32_t> suffix = tok.prompt_suffix();
  if (suffix.size() == 1) {
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(suffix[0]));
    w.set_bool("tokenizer.ggml.add_eos_token", true);
  } else if (const auto eos = tok.eos_token_id()) {
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*eos));
  }
  if (const auto pad = tok.pad_token_id()) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*pad));
  // The BOS id: the one a tokenizer starts plain prompts with (Llama 3's tokenizer.json
  // post-processor), which llama.cpp then adds too; else the checkpoint's (Qwen2.5:
  // <|endoftext|>, never prepended), as the converter does. Without one llama.cpp assumes
  // GPT-2's id 11.
  const std::span<const int32_t> prefix = tok.prompt_prefix();
  const auto config = read_json_object(src, "config.json");
  if (prefix.size() == 1) {
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(prefix[0]));
  } else if (const auto bos = config.find("bos_token_id");
             bos != config.end() && bos->is_number_unsigned() && bos->get<uint64_t>() < padded_vocab) {
    w.set_u32("tokenizer.ggml.bos_token_id", bos->get<uint32_t>());
  }
  w.set_bool("tokenizer.ggml.add_bos_token", prefix.size() == 1);
  const auto tok_config = read_json_object(src, "tokenizer_config.json");
  if (const auto t = tok_config.find("chat_template"); t != tok_config.end() && t->is_string()) {
    w.set_string("tokenizer.chat_template", t->get<std::string>());
  }
}

void check_out_file(const fs::path& out) {
  if (out.extension() != ".gguf") {
    fail("{}: a GGUF file's name must end in .gguf (that is how -m knows to read it as GGUF)", out.string());
  }
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) {
    fail("{}: already exists; remove it or choose another name", out.string());
  }
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) fail("{}: the directory {} does not exist", out.string(), parent.string());
}

// The model's name in general.name: its directory's (the embedded model's: "default-model").
std::string model_name(const fs::path& dir) {
  if (dir.empty()) return embedded_model_label().filename().string();
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(dir, ec);
  return (ec ? dir : canonical).filename().string();
}

// The body of both public calls: `dir` is a located model directory, `out` checked.
uint64_t write_gguf(const fs::path& dir, const fs::path& out, std::optional<WeightType> type, const std::string& name,
                    const GgufExportProgress& progress) {
  const std::unique_ptr<const ModelSource> opened = open_model_directory(dir);
  const ModelFiles& files = opened->files;
  const ModelConfig& cfg = opened->config;
  const WeightSource& src = opened->weights;
  const Tokenizer tok = load_tokenizer(*opened);
  // Read again as JSON for the GGUF arrays (load_tokenizer has checked it is there).
  const std::string tokenizer_json = opened->read_text("tokenizer.json", kMaxTokenizerFileBytes).value_or("");
  const std::vector<TensorSpec> manifest = tensor_manifest(cfg);
  if (const auto problems = manifest_problems(manifest, src.manifest_infos, src.declared_blocks); !problems.empty()) {
    fail("{}: {}", files.weights.string(), problems.front());
  }

  GgufWriter w(out);
  // Llama: llama.cpp rotates adjacent pairs, so q and k rows are stored permuted (the loader
  // undoes it), and RoPE scaling travels as rope_freqs.weight.
  const bool llama = cfg.architecture == Architecture::Llama;
  const std::string_view arch = cfg.model_type;
  const auto key = [&](std::string_view suffix) { return fmt::format("{}.{}", arch, suffix); };
  w.set_string("general.architecture", std::string(arch));
  w.set_string("general.name", name);
  w.set_u32("general.file_type", 0);  // set below, once the matrices' types are known
  w.set_u32(key("block_count"), static_cast<uint32_t>(cfg.num_hidden_layers));
  w.set_u32(key("context_length"), static_cast<uint32_t>(cfg.max_position_embeddings));
  w.set_u32(key("embedding_length"), static_cast<uint32_t>(cfg.hidden_size));
  w.set_u32(key("feed_forward_length"), static_cast<uint32_t>(cfg.intermediate_size));
  w.set_u32(key("attention.head_count"), static_cast<uint32_t>(cfg.num_attention_heads));
  w.set_u32(key("attention.head_count_kv"), static_cast<uint32_t>(cfg.num_key_value_heads));
  if (cfg.explicit_head_dim != 0) {
    w.set_u32(key("attention.key_length"), static_cast<uint32_t>(cfg.head_dim()));
    w.set_u32(key("attention.value_length"), static_cast<uint32_t>(cfg.head_dim()));
  }
  w.set_f32(key("rope.freq_base"), static_cast<float>(cfg.rope_theta));
  w.set_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(cfg.rms_norm_eps));
  w.set_u32(key("rope.dimension_count"), static_cast<uint32_t>(cfg.head_dim()));
  set_tokenizer(w, *opened, tokenizer_json, static_cast<size_t>(cfg.vocab_size), tok, llama);
  // The sentence-transformers pooling as llama.cpp's enum (1 mean, 2 cls, 3 last).
  if (const std::optional<Pooling> pooling = read_model_pooling(*opened).pooling)
    w.set_u32(key("pooling_type"), *pooling == Pooling::Mean ? 1u : *pooling == Pooling::Cls ? 2u : 3u);
  // A quantized directory's record of how it was made travels with the weights.
  if (!src.quantization.empty()) w.set_string("nanoinfer.quantization", src.quantization);

  std::map<WeightType, size_t> matrix_types;  // how many matrices of each type are written
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
      ++matrix_types[to];
    }
    const size_t rows = spec.is_matrix() ? static_cast<size_t>(spec.shape[0]) : 1;
    const size_t cols = static_cast<size_t>(spec.shape.back());
    const size_t row_bytes = weight_row_bytes(to, cols);
    std::vector<uint64_t> dims(spec.shape.rbegin(), spec.shape.rend());
    const StoredTensor* stored = t;
    const WeightSource* source = &src;
    auto pos = std::make_shared<size_t>(0);
    // The Hugging Face row that file row r holds: r itself, or for Llama's q and k the one
    // llama.cpp's permutation puts there (row t d/2 + j of a head at row 2j + t).
    const size_t d =
        llama && (spec.slot == TensorSlot::Q || spec.slot == TensorSlot::K) ? static_cast<size_t>(cfg.head_dim()) : 0;
    const auto source_row = [d](size_t r) { return d == 0 ? r : r - r % d + (r % d % 2) * (d / 2) + r % d / 2; };
    if (t->exact == to && t->row_bytes == row_bytes && d == 0) {
      // Stored as written: the bytes pass through unchanged, chunk by chunk.
      w.add(spec.gguf_name, ggml_type_of(to), std::move(dims), [=](std::span<std::byte> chunk) {
        source->read(*stored, *pos, chunk);
        *pos += chunk.size();
      });
      continue;
    }
    // The converted tensor is built on the writer's first request and handed out in chunks.
    auto converted = std::make_shared<std::vector<std::byte>>();
    w.add(spec.gguf_name, ggml_type_of(to), std::move(dims), [=](std::span<std::byte> chunk) {
      if (converted->empty()) {
        converted->resize(rows * row_bytes);
        std::vector<std::byte> staged(stored->row_bytes);
        std::vector<float> row(cols);
        for (size_t r = 0; r < rows; ++r) {
          source->read(*stored, source_row(r) * stored->row_bytes, staged);
          stored->widen_row(staged.data(), row.data(), cols);
          encode_row(to, row.data(), converted->data() + r * row_bytes, cols);
        }
      }
      std::copy_n(converted->data() + *pos, chunk.size(), chunk.data());
      *pos += chunk.size();
      if (*pos == converted->size()) std::vector<std::byte>().swap(*converted);
    });
  }
  if (llama && cfg.rope_scaling) {
    // llama.cpp's divisors: each plain frequency over its scaled one.
    const auto plain = rope_inv_freq(static_cast<size_t>(cfg.head_dim()), cfg.rope_theta, std::nullopt);
    const auto scaled = rope_inv_freq(static_cast<size_t>(cfg.head_dim()), cfg.rope_theta, cfg.rope_scaling);
    auto freqs = std::make_shared<std::vector<float>>(plain.size());
    for (size_t i = 0; i < plain.size(); ++i) (*freqs)[i] = static_cast<float>(plain[i] / scaled[i]);
    auto at = std::make_shared<size_t>(0);
    w.add("rope_freqs.weight", ggml_type_of(WeightType::F32), {freqs->size()}, [freqs, at](std::span<std::byte> chunk) {
      std::memcpy(chunk.data(), reinterpret_cast<const std::byte*>(freqs->data()) + *at, chunk.size());
      *at += chunk.size();
    });
  }
  // The file type names what most matrices hold (a q4_0 file keeps its logits matrix q8_0, as
  // llama.cpp's own mostly-q4_0 files keep theirs in a wider type).
  WeightType main_type = WeightType::F32;
  size_t most = 0;
  for (const auto& [t, n] : matrix_types) {
    if (n > most) main_type = t, most = n;
  }
  w.set_u32("general.file_type", weight_type_info(main_type).gguf_file_type);
  if (weight_type_info(main_type).quantized) w.set_u32("general.quantization_version", 2);

  // Room for the data, each tensor's padding, and the metadata (the tokenizer arrays are no
  // larger than tokenizer.json, plus a length per string).
  const uint64_t tokenizer_bytes = tokenizer_json.size();
  require_free_space(out, w.data_bytes() + manifest.size() * (w.alignment() + 128) + 2 * tokenizer_bytes + (64 << 10),
                     out.string());
  w.write(progress);
  return w.data_bytes();
}

}  // namespace

uint64_t export_gguf(const fs::path& model_dir, const fs::path& out_file, std::optional<WeightType> type,
                     const GgufExportProgress& progress) {
  check_out_file(out_file);
  return write_gguf(model_dir, out_file, type, model_name(model_dir), progress);
}

QuantizeResult quantize_to_gguf(std::string_view model_path, const fs::path& out_file, const QuantizeOptions& options,
                                const QuantizeProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  check_out_file(out_file);
  const fs::path dir(model_path);  // empty: the embedded model
  // Where the quantized model directory is built before the GGUF file is written: a hidden
  // directory beside the output, removed however the call ends.
  const ScratchDir scratch = ScratchDir::beside(out_file);
  QuantizeResult r;
  try {
    r = quantize_model(dir.string(), scratch.path() / "model", options, progress);
    write_gguf(scratch.path() / "model", out_file, std::nullopt, model_name(dir), [&](uint64_t done, uint64_t total) {
      if (progress) progress({"gguf", done, total});
    });
  } catch (const Error& e) {
    // A path inside the hidden scratch directory means nothing to the user: name --out.
    std::string message = e.what();
    const std::string hidden = scratch.path().string();
    if (const size_t at = message.find(hidden); at != std::string::npos) {
      const size_t end = message.find(": ", at);
      message.replace(at, (end == std::string::npos ? message.size() : end) - at, out_file.string());
    }
    throw Error(message);
  }
  r.out = out_file;
  r.file_bytes = fs::file_size(out_file);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace nanoinfer
