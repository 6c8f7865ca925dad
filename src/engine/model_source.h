// A model path opened once: the one place that asks whether it is a GGUF file, reads the
// weights file's header and the config, and wraps the open file as a WeightSource that loading
// (Model::load) and inspect walk. open_model, open_model_alone, inspect_model, quantization
// (its calibration model loads from the same open file) and GGUF export all start here.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/weight_source.h"
#include "nanoinfer/config.h"
#include "nanoinfer/engine.h"
#include "nanoinfer/model.h"

namespace nanoinfer {

struct ModelSource {
  // For a GGUF file: dir its directory, config and weights the file itself.
  ModelFiles files;
  ModelConfig config;  // from config.json, or from a GGUF file's qwen2.* metadata
  // Exactly one is open; `weights` reads through it, so a ModelSource never moves (it is
  // handed out behind a unique_ptr).
  std::optional<SafetensorsFile> safetensors;
  std::optional<GgufFile> gguf;
  WeightSource weights;

  ModelSource() = default;
  ModelSource(const ModelSource&) = delete;
  ModelSource& operator=(const ModelSource&) = delete;
};

// `path` is already resolved (resolve_model_path). A path ending in .gguf that is not a
// directory is a GGUF file; anything else a model directory (locate_model's checks). Throws
// a one-line Error for a missing file, a corrupt header or an unsupported architecture.
std::unique_ptr<const ModelSource> open_model_source(const std::filesystem::path& path);

// The same for a path that must be a model directory (conversion and quantization read
// Hugging Face directories): a GGUF file is refused by name.
std::unique_ptr<const ModelSource> open_model_directory(const std::filesystem::path& path);

// Whether a resolved path names a GGUF file (throws when it names one that does not exist).
bool is_gguf_path(const std::filesystem::path& path);

// Model::load over the source, after refusing a context longer than the model's limit.
Model load_model(const ModelSource& src, const ModelOptions& options);

}  // namespace nanoinfer
