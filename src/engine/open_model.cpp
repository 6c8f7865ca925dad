// open_model: the engine's one way from a model path to a runnable model (nanoinfer/open_model.h).
#include <chrono>
#include <cstdlib>

#include "engine/model_pooling.h"
#include "engine/model_source.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/hub_cache.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/tuning_cache.h"
#include "tokenizer/tokenizer_gguf.h"

namespace nanoinfer {

OpenedModel open_model(std::string_view path, const OpenOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::unique_ptr<const ModelSource> src = open_model_source(path);
  const std::filesystem::path tokenizer_json = src->path_of("tokenizer.json");
  if (!src->gguf && !src->has("tokenizer.json")) {
    fail(
        "{}: not found; generation needs the model's tokenizer (`nanoinfer pull ORG/NAME` "
        "fetches it with the model; for a `nanoinfer synth` model copy Qwen2.5's tokenizer.json into the directory)",
        tokenizer_json.string());
  }
  TuningCache tuning;
  ModelOptions model_options = options.model;
  if (options.use_tuning_cache && model_options.tuning == nullptr) {
    // The ISA and thread count the model will resolve to (Model::load refuses an unsupported ISA).
    const Isa isa = model_options.isa.value_or(best_isa());
    const int threads = model_options.threads > 0 ? model_options.threads : ThreadPool::physical_cores();
    tuning = read_tuning_cache(tuning_cache_path(isa, threads), cpu_model_name(), isa, threads);
    model_options.tuning = tuning.tuning;
  }
  Model model = load_model(*src, model_options);
  if (model.follower()) {
    // A follower rank of a tensor-parallel run never returns to the command: it runs rank 0's
    // steps on its slice until rank 0's model is gone, then the process ends (docs/SCALING.md).
    model.follow();
    std::exit(0);
  }
  // A GGUF file carries the tokenizer and its eos id; a directory has its own files for them.
  Tokenizer tokenizer = load_tokenizer(*src);
  GenerationConfig generation;
  if (src->gguf) {
    if (const auto eos = tokenizer.eos_token_id()) generation.eos_token_ids.push_back(*eos);
  } else if (const auto text = src->read_text("generation_config.json", kMaxConfigFileBytes)) {
    // Absent is fine (Hugging Face defaults); present but unreadable is an error.
    generation = GenerationConfig::parse(*text, src->path_of("generation_config.json").string());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (static_cast<size_t>(tokenizer.vocab_size()) > model.vocab_size()) {
    fail("{}: the tokenizer has {} tokens but the model only {} (they do not belong together)",
         src->gguf ? src->files.weights.string() : tokenizer_json.string(), tokenizer.vocab_size(), model.vocab_size());
  }
  return {src->gguf ? src->files.weights : src->files.dir,
          std::move(model),
          std::move(tokenizer),
          std::move(generation),
          seconds,
          std::move(tuning),
          read_model_pooling(*src)};
}

Model open_model_alone(const std::filesystem::path& path, const ModelOptions& options) {
  return load_model(*open_model_source(path), options);
}

Tokenizer open_tokenizer(std::string_view model) {
  const std::filesystem::path path = resolve_model_path(model);
  // The embedded model's weights header is parsed in memory, nothing read: as cheap as the rest.
  if (path.empty()) return load_tokenizer(*open_model_source(path));
  if (is_gguf_path(path)) return tokenizer_from_gguf(GgufFile::open(path).layout());
  return Tokenizer::load(path);
}

}  // namespace nanoinfer
