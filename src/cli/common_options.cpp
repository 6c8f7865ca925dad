#include "common_options.h"

#include <fmt/format.h>

#include <chrono>

#include "kernels/kernels.h"
#include "nanoinfer/default_model.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model_files.h"

namespace nanoinfer::cli {

void add_model_flags(CLI::App& app, ModelFlags& flags) {
  app.add_option("-m,--model", flags.model_dir,
                 "Model directory (config.json, model.safetensors, tokenizer.json); "
                 "default: the embedded model in data/default-model");
  app.add_option("-t,--threads", flags.threads, "Threads (0 = one per physical core)");
  app.add_option("-c,--ctx-size", flags.context,
                 "Context length in tokens (0 = the model's, at most 4096)");
  app.add_option("--isa", flags.isa, "Kernel instruction set: auto, scalar, avx2 or avx512");
  app.add_option("--dtype", flags.dtype,
                 "Weights in memory: as-stored (bf16 read in place), f32 (widen at load) or "
                 "bf16 (narrow f32 at load)");
}

void add_sampling_flags(CLI::App& app, SamplingOverrides& o) {
  // CLI11 fills std::optional members only when the flag is given.
  app.add_option("--temp", o.temperature, "Temperature; 0 = greedy (the way to compare engines)");
  app.add_option("--top-k", o.top_k, "Keep the k most probable tokens (0 = off)");
  app.add_option("--top-p", o.top_p, "Nucleus: smallest set with probability >= p, in (0, 1]");
  app.add_option("--min-p", o.min_p, "Drop tokens below min-p x the top probability, in [0, 1]");
  app.add_option("--repeat-penalty", o.repetition_penalty,
                 "Repetition penalty over the context, > 0 (1 = off; Hugging Face semantics)");
  app.add_option("--seed", o.seed, "Random seed (default: random, shown with --verbose)");
}

void require_non_negative(int64_t value, std::string_view flag) {
  if (value < 0) fail("{} must be >= 0, got {}", flag, value);
}

std::string format_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
}

static ModelOptions::WeightMode parse_dtype(std::string_view name) {
  if (name == "as-stored") return ModelOptions::WeightMode::AsStored;
  if (name == "f32") return ModelOptions::WeightMode::F32;
  if (name == "bf16") return ModelOptions::WeightMode::BF16;
  fail("--dtype must be as-stored, f32 or bf16, got '{}'", name);
}

LoadedModel load_model(const ModelFlags& flags) {
  if (flags.threads < 0) fail("-t must be >= 1 (or 0 = one per physical core), got {}", flags.threads);
  require_non_negative(flags.context, "-c");
  const ModelOptions::WeightMode weights = parse_dtype(flags.dtype);
  const std::optional<kernels::Isa> isa = kernels::parse_isa(flags.isa);
  if (!isa) fail("--isa must be auto, scalar, avx2 or avx512, got '{}'", flags.isa);
  kernels::set_isa(*isa);

  const ModelFiles files = locate_model(resolve_model_dir(flags.model_dir));
  const std::filesystem::path tokenizer_json = files.dir / "tokenizer.json";
  if (!std::filesystem::exists(tokenizer_json)) {
    fail("{}: not found; generation needs the model's tokenizer (scripts/download-qwen2.5-0.5b.sh "
         "fetches it; for a `nanoinfer synth` model copy Qwen2.5's tokenizer.json into the directory)",
         tokenizer_json.string());
  }
  const ModelConfig config = ModelConfig::load(files.config);
  if (flags.context > config.max_position_embeddings) {
    fail("-c {} exceeds the model's limit of {} positions (max_position_embeddings)", flags.context,
         config.max_position_embeddings);
  }

  const auto start = std::chrono::steady_clock::now();
  ModelOptions options;
  options.weights = weights;
  options.threads = flags.threads;
  options.max_context = static_cast<size_t>(flags.context);
  Model model = Model::load(files.dir, options);
  Tokenizer tokenizer = Tokenizer::load(files.dir);
  GenerationConfig generation = GenerationConfig::load_from_dir(files.dir);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (static_cast<size_t>(tokenizer.vocab_size()) > model.vocab_size()) {
    fail("{}: the tokenizer has {} tokens but the model only {} (they do not belong together)",
         tokenizer_json.string(), tokenizer.vocab_size(), model.vocab_size());
  }
  return {files.dir, std::move(model), std::move(tokenizer), std::move(generation), seconds};
}

}  // namespace nanoinfer::cli
