#include "engine/model_source.h"

#include "model/gguf_config.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

bool is_gguf_path(const std::filesystem::path& path) {
  if (path.extension() != ".gguf" || std::filesystem::is_directory(path)) return false;
  if (!std::filesystem::is_regular_file(path)) fail("{}: no such GGUF file", path.string());
  return true;
}

namespace {

std::unique_ptr<const ModelSource> open_directory(const std::filesystem::path& path) {
  auto src = std::make_unique<ModelSource>();
  src->files = locate_model(path);
  src->config = ModelConfig::load(src->files.config);
  src->weights = safetensors_source(src->safetensors.emplace(SafetensorsFile::open(src->files.weights)));
  return src;
}

}  // namespace

std::unique_ptr<const ModelSource> open_model_source(const std::filesystem::path& path) {
  if (!is_gguf_path(path)) return open_directory(path);
  // A GGUF file carries everything in one: config, tokenizer, eos ids and the weights.
  auto src = std::make_unique<ModelSource>();
  src->files = {path.parent_path(), path, path};
  const GgufFile& file = src->gguf.emplace(GgufFile::open(path));
  src->config = config_from_gguf(file.layout());
  src->weights = gguf_source(file);
  return src;
}

std::unique_ptr<const ModelSource> open_model_directory(const std::filesystem::path& path) {
  if (is_gguf_path(path)) {
    fail("{}: a GGUF file; this reads a model directory (config.json + model.safetensors)", path.string());
  }
  return open_directory(path);
}

Model load_model(const ModelSource& src, const ModelOptions& options) {
  if (options.max_context > static_cast<size_t>(src.config.max_position_embeddings)) {
    fail("-c {} exceeds the model's limit of {} positions ({})", options.max_context,
         src.config.max_position_embeddings, src.gguf ? "context_length" : "max_position_embeddings");
  }
  return Model::load(src.config, src.weights, options);
}

}  // namespace nanoinfer
