#include "nanoinfer/synth.h"

#include "io/safetensors_writer.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json_object.h"
#include "base/output_files.h"
#include "model/manifest.h"
#include "nanoinfer/atomic_write.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer {

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

// Approximately standard normal: the sum of four 16-bit uniforms (Irwin-Hall, n = 4) has mean
// 4 * 32767.5 and variance 4 * (65536^2 - 1) / 12; centring and scaling gives unit variance.
// The sum is an exact integer and the scaling one multiply, so results are bit-reproducible.
float standard_normal(SplitMix64& rng) {
  const uint64_t r = rng.next();
  const int64_t sum = static_cast<int64_t>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  constexpr double kMean = 4 * 32767.5;
  constexpr double kInvStd = 1.0 / 37837.2277;  // sqrt(4 * (65536^2 - 1) / 12)
  return static_cast<float>((static_cast<double>(sum) - kMean) * kInvStd);
}

// The writer for `out_file` with every required manifest tensor added (nothing written yet).
SafetensorsWriter synthetic_writer(const ModelConfig& cfg, const std::filesystem::path& out_file,
                                   const SynthOptions& options) {
  if (options.dtype != DType::BF16 && options.dtype != DType::F32)
    fail("synth: dtype {} is not supported (use BF16 or F32)", dtype_name(options.dtype));
  SafetensorsWriter writer(out_file);
  writer.set_metadata("format", "pt");
  writer.set_metadata("nanoinfer_synth_seed", std::to_string(options.seed));
  for (const TensorSpec& spec : tensor_manifest(cfg)) {
    if (!spec.required) continue;  // a tied lm_head is not stored
    const float mean = spec.role == TensorRole::Norm ? 1.0f : 0.0f;
    const DType dtype = options.dtype;
    // The stream state lives in the callback, which sees the tensor's chunks in order.
    SplitMix64 rng{options.seed ^ fnv1a(spec.name)};
    const std::string_view stored = options.embedding && spec.name.starts_with("model.")
                                        ? std::string_view(spec.name).substr(std::string_view("model.").size())
                                        : std::string_view(spec.name);
    writer.add(std::string(stored), dtype, spec.shape, [rng, mean, dtype](std::span<std::byte> out) mutable {
      if (dtype == DType::BF16) {
        for (size_t i = 0; i < out.size(); i += 2) {
          const uint16_t h = f32_to_bf16(mean + 0.02f * standard_normal(rng));
          std::memcpy(out.data() + i, &h, 2);
        }
      } else {
        for (size_t i = 0; i < out.size(); i += 4) {
          const float f = mean + 0.02f * standard_normal(rng);
          std::memcpy(out.data() + i, &f, 4);
        }
      }
    });
  }
  return writer;
}

// What a failed synth_model_dir undoes: the files it put in the directory that were not there
// before, then the directories it created, innermost first. Removal is never recursive, so
// anything else that appeared in a directory meanwhile keeps it (and itself) in place.
class Undo {
 public:
  void file(const std::filesystem::path& path) {
    if (!path_exists(path)) files_.push_back(path);
  }
  // Records the missing directories on the way to `dir`; call before creating it.
  void directories(const std::filesystem::path& dir) {
    for (std::filesystem::path p = dir; !p.empty() && !path_exists(p); p = p.parent_path()) {
      dirs_.push_back(p);  // innermost first
      if (p == p.parent_path()) break;
    }
  }
  void run() noexcept {
    std::error_code ec;
    for (const auto& f : files_) std::filesystem::remove(f, ec);
    for (const auto& d : dirs_) std::filesystem::remove(d, ec);
  }

 private:
  std::vector<std::filesystem::path> files_;
  std::vector<std::filesystem::path> dirs_;
};

// synth writes a new model directory, as quantize does: --out must be absent or an empty
// directory (not a link to one). Absent includes a path under a file (ENOTDIR), which
// create_directories then reports.
void require_new_model_dir(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;
    fail("{}: cannot check the output directory: {}", dir.string(), std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    fail("{}: is {}; synth writes a new model directory (name one that does not exist, or an empty directory)",
         dir.string(), file_kind_name(st.st_mode));
  }
  std::error_code ec;
  if (!std::filesystem::is_empty(dir, ec) || ec) {
    fail(
        "{}: already exists and is not empty; synth writes a new model directory (remove it or choose another "
        "--out)",
        dir.string());
  }
}

// The sentence-transformers files of an embedding checkpoint (Qwen3-Embedding's): the modules,
// last-token pooling, and the tokenizer with <|endoftext|> appended by its post-processor.
std::vector<std::pair<std::string, std::string>> embedding_files(int64_t hidden, const std::string& tokenizer_json,
                                                                 const std::filesystem::path& tokenizer_path) {
  std::vector<std::pair<std::string, std::string>> files;
  files.emplace_back("modules.json", R"([
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
]
)");
  files.emplace_back("1_Pooling/config.json", fmt::format(R"({{
  "word_embedding_dimension": {},
  "pooling_mode_cls_token": false,
  "pooling_mode_mean_tokens": false,
  "pooling_mode_max_tokens": false,
  "pooling_mode_mean_sqrt_len_tokens": false,
  "pooling_mode_weightedmean_tokens": false,
  "pooling_mode_lasttoken": true,
  "include_prompt": true
}}
)",
                                                          hidden));
  if (tokenizer_json.empty()) return files;
  nlohmann::json doc = parse_json_object(tokenizer_json, tokenizer_path.string());
  std::optional<int64_t> end;
  for (const nlohmann::json& t : doc.value("added_tokens", nlohmann::json::array()))
    if (t.is_object() && t.value("content", "") == "<|endoftext|>") end = t.value("id", int64_t{-1});
  if (!end || *end < 0) fail("{}: no added token <|endoftext|> to end embedding inputs with", tokenizer_path.string());
  const nlohmann::json text = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const nlohmann::json eot = {{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}};
  doc["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {text, eot}},
      {"pair", nlohmann::json::array()},
      {"special_tokens",
       {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {*end}}, {"tokens", {"<|endoftext|>"}}}}}}};
  files.emplace_back("tokenizer.json", doc.dump());
  return files;
}

}  // namespace

uint64_t write_synthetic_weights(const ModelConfig& cfg, const std::filesystem::path& out_file,
                                 const SynthOptions& options, const WriteProgress& progress) {
  const SafetensorsWriter writer = synthetic_writer(cfg, out_file, options);
  writer.write(progress);
  return writer.data_bytes();
}

uint64_t synth_model_dir(const std::filesystem::path& config_json, const std::filesystem::path& out_dir,
                         const SynthOptions& options, const WriteProgress& progress) {
  if (out_dir.empty()) fail("synth: --out is empty; name the model directory to write");
  const ModelConfig cfg = ModelConfig::load(config_json);
  if (options.embedding && !cfg.tie_word_embeddings)
    fail("{}: an embedding checkpoint has no lm_head; its config must tie the embeddings (tie_word_embeddings true)",
         config_json.string());
  const std::filesystem::path weights = out_dir / "model.safetensors";
  const SafetensorsWriter writer = synthetic_writer(cfg, weights, options);

  // Everything that can be checked is, before the directory is made: the target (absent or an
  // empty directory: a model directory already there keeps its weights, and nothing inside it
  // can redirect a write), the files to copy, and room for all of it (the safetensors header,
  // a few KB, is left to the writer's own exact check).
  require_new_model_dir(out_dir);
  std::vector<std::pair<std::filesystem::path, const char*>> copies = {{config_json, "config.json"}};
  const auto beside = config_json.has_parent_path() ? config_json.parent_path() : std::filesystem::path(".");
  for (const char* name : {"generation_config.json", "tokenizer_config.json"})
    if (path_exists(beside / name)) copies.emplace_back(beside / name, name);
  uint64_t bytes = writer.data_bytes();
  for (const auto& [from, name] : copies) {
    require_regular_file(from);
    bytes += std::filesystem::file_size(from);
  }
  // Written files: the tokenizer (rewritten for an embedding model) and the embedding modules.
  std::string tokenizer;
  if (!options.tokenizer_json.empty()) tokenizer = read_file(options.tokenizer_json, kMaxTokenizerFileBytes);
  std::vector<std::pair<std::string, std::string>> written;
  if (options.embedding) written = embedding_files(cfg.hidden_size, tokenizer, options.tokenizer_json);
  if (!tokenizer.empty() && !options.embedding) written.emplace_back("tokenizer.json", tokenizer);
  for (const auto& [name, text] : written) bytes += text.size();
  require_free_space(out_dir, bytes, weights.string());

  Undo undo;
  undo.directories(options.embedding ? out_dir / "1_Pooling" : out_dir);
  undo.file(weights);
  for (const auto& [from, name] : copies) undo.file(out_dir / name);
  for (const auto& [name, text] : written) undo.file(out_dir / name);
  try {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) fail("{}: cannot create directory: {}", out_dir.string(), ec.message());
    // Weights first: an interrupted run leaves no config claiming a model is there.
    writer.write(progress);
    for (const auto& [from, name] : copies) write_file_atomically(out_dir / name, read_file(from, kMaxConfigFileBytes));
    if (options.embedding) std::filesystem::create_directories(out_dir / "1_Pooling");
    for (const auto& [name, text] : written) write_file_atomically(out_dir / name, text);
  } catch (...) {
    undo.run();
    throw;
  }
  return writer.data_bytes();
}

}  // namespace nanoinfer
