// A model path opened once: the one place that asks whether it is a GGUF file, reads the
// weights file's header and the config, and wraps the open file as a WeightSource that loading
// (Model::load) and inspect walk. open_model, open_model_alone, inspect_model, quantization
// (its calibration model loads from the same open file) and GGUF export all start here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/weight_source.h"
#include "nanoinfer/config.h"
#include "nanoinfer/model.h"
#include "nanoinfer/model_files.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

struct ModelSource {
  // For a GGUF file: dir its directory, config and weights the file itself. For the embedded
  // default model: names under embedded_model_label(), for messages only.
  ModelFiles files;
  bool embedded = false;  // the default model built into the executable, read in place
  ModelConfig config;     // from config.json, or from a GGUF file's qwen2.* metadata
  // Exactly one is open; `weights` reads through it, so a ModelSource never moves (it is
  // handed out behind a unique_ptr).
  std::optional<SafetensorsFile> safetensors;
  std::optional<GgufFile> gguf;
  WeightSource weights;

  ModelSource() = default;
  ModelSource(const ModelSource&) = delete;
  ModelSource& operator=(const ModelSource&) = delete;

  // One of a directory's other files (tokenizer.json, tokenizer_config.json,
  // generation_config.json, or config.json as text), from disk or from the embedded bytes:
  // nullopt when absent; an Error when present but unreadable or longer than max_bytes.
  std::optional<std::string> read_text(std::string_view name, uint64_t max_bytes) const;
  // Whether the directory has that file (an Error when it cannot tell, as path_exists).
  bool has(std::string_view name) const;
  // The same file's path in messages: files.dir / name.
  std::filesystem::path path_of(std::string_view name) const { return files.dir / name; }
};

// An empty `path` is the embedded default model; ORG/NAME[@REVISION][:QUANT], when nothing on
// disk has that name, a model in the Hugging Face cache (resolve_model_path). A path ending in
// .gguf that is not a directory is a GGUF file; anything else a model directory (locate_model's checks). Throws
// a one-line Error for a missing file, a corrupt header or an unsupported architecture.
std::unique_ptr<const ModelSource> open_model_source(const std::filesystem::path& path);

// The same for a path that must be a model directory (conversion and quantization read
// Hugging Face directories): a GGUF file is refused by name.
std::unique_ptr<const ModelSource> open_model_directory(const std::filesystem::path& path);

// Whether a resolved path names a GGUF file (throws when it names one that does not exist).
bool is_gguf_path(const std::filesystem::path& path);

// The model's tokenizer: a GGUF file's tokenizer.ggml.* arrays, or a directory's
// tokenizer.json with its tokenizer_config.json (an Error naming the file when it is absent).
Tokenizer load_tokenizer(const ModelSource& src);

// Model::load over the source, after refusing a context longer than the model's limit.
Model load_model(const ModelSource& src, const ModelOptions& options);

}  // namespace nanoinfer
