// open_model: the engine's one way from a model path to a runnable model (nanoinfer/engine.h).
#include <chrono>

#include "io/gguf.h"
#include "model/gguf_config.h"
#include "nanoinfer/engine.h"
#include "nanoinfer/error.h"
#include "tokenizer/tokenizer_gguf.h"

namespace nanoinfer {

namespace {

// A GGUF file carries everything in one: config, tokenizer, eos ids and the weights.
OpenedModel open_gguf(const std::filesystem::path& file, const OpenOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  ModelConfig config;
  Tokenizer tokenizer = [&] {
    const GgufFile gguf = GgufFile::open(file);
    config = config_from_gguf(gguf.layout());
    return tokenizer_from_gguf(gguf.layout());
  }();
  GenerationConfig generation;
  if (const auto eos = tokenizer.eos_token_id()) generation.eos_token_ids.push_back(*eos);
  if (options.model.max_context > static_cast<size_t>(config.max_position_embeddings)) {
    fail("-c {} exceeds the model's limit of {} positions (context_length)", options.model.max_context,
         config.max_position_embeddings);
  }
  Model model = Model::load(config, file, options.model);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {file, std::move(model), std::move(tokenizer), std::move(generation), seconds};
}

}  // namespace

OpenedModel open_model(std::string_view path, const OpenOptions& options) {
  // The ISA first: refusing it must not wait for a gigabyte of weights.
  if (options.model.isa) require_isa(*options.model.isa);
  const std::filesystem::path resolved = resolve_model_path(path);
  if (resolved.extension() == ".gguf" && !std::filesystem::is_directory(resolved)) {
    if (!std::filesystem::is_regular_file(resolved)) fail("{}: no such GGUF file", resolved.string());
    return open_gguf(resolved, options);
  }
  const ModelFiles files = locate_model(resolved);
  const std::filesystem::path tokenizer_json = files.dir / "tokenizer.json";
  if (!std::filesystem::exists(tokenizer_json)) {
    fail("{}: not found; generation needs the model's tokenizer (scripts/download-qwen2.5-0.5b.sh "
         "fetches it; for a `nanoinfer synth` model copy Qwen2.5's tokenizer.json into the directory)",
         tokenizer_json.string());
  }
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig config = ModelConfig::load(files.config);
  if (options.model.max_context > static_cast<size_t>(config.max_position_embeddings)) {
    fail("-c {} exceeds the model's limit of {} positions (max_position_embeddings)", options.model.max_context,
         config.max_position_embeddings);
  }
  Model model = Model::load(config, files.weights, options.model);
  Tokenizer tokenizer = Tokenizer::load(files.dir);
  GenerationConfig generation = GenerationConfig::load_from_dir(files.dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (static_cast<size_t>(tokenizer.vocab_size()) > model.vocab_size()) {
    fail("{}: the tokenizer has {} tokens but the model only {} (they do not belong together)",
         tokenizer_json.string(), tokenizer.vocab_size(), model.vocab_size());
  }
  return {files.dir, std::move(model), std::move(tokenizer), std::move(generation), seconds};
}

Tokenizer open_tokenizer(std::string_view path) {
  const std::filesystem::path resolved = resolve_model_path(path);
  if (resolved.extension() == ".gguf" && !std::filesystem::is_directory(resolved)) {
    if (!std::filesystem::is_regular_file(resolved)) fail("{}: no such GGUF file", resolved.string());
    return tokenizer_from_gguf(GgufFile::open(resolved).layout());
  }
  return Tokenizer::load(resolved);
}

}  // namespace nanoinfer
