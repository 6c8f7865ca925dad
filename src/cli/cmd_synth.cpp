// `nanoinfer synth --config CONFIG.json --out DIR [--seed N] [--dtype bf16|f32] [--tokenizer FILE]
// [--embedding]`: a complete model directory with seeded random weights in the exact shapes the
// config implies.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "command.h"
#include "nanoinfer/error.h"
#include "nanoinfer/synth.h"
#include "output.h"

namespace nanoinfer::cli {
namespace {

struct SynthArgs {
  std::string config;
  std::string out;
  uint64_t seed = 0;
  std::string dtype = "bf16";
  bool embedding = false;
  std::string tokenizer;
};

void synth(const SynthArgs& args) {
  SynthOptions options;
  options.seed = args.seed;
  options.embedding = args.embedding;
  options.tokenizer_json = args.tokenizer;
  if (args.dtype == "bf16") {
    options.dtype = DType::BF16;
  } else if (args.dtype == "f32") {
    options.dtype = DType::F32;
  } else {
    fail("--dtype {}: expected bf16 or f32", args.dtype);
  }

  // Progress on stderr, redrawn in place, only when it is a terminal: a log or a pipe gets the
  // summary line alone.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  int last_step = -1;
  WriteProgress progress;
  if (tty) {
    progress = [&](uint64_t done, uint64_t total) {
      const int step = total == 0 ? 100 : static_cast<int>(done * 100 / total);
      if (step == last_step) return;
      last_step = step;
      fmt::print(stderr, "\rsynth: {:6.1f} / {:.1f} MiB ({}%)", static_cast<double>(done) / (1 << 20),
                 static_cast<double>(total) / (1 << 20), step);
      std::fflush(stderr);
    };
  }

  const auto t0 = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  try {
    bytes = synth_model_dir(args.config, args.out, options, progress);
  } catch (const Error&) {
    // The error line starts on a line of its own, not after the redrawn progress.
    if (tty && last_step >= 0) fmt::print(stderr, "\n");
    throw;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (tty) fmt::print(stderr, "\n");
  print_out("wrote {}/model.safetensors: {:.1f} MiB of {} tensors (seed {}) in {:.2f} s\n", args.out,
            static_cast<double>(bytes) / (1 << 20), args.dtype, args.seed, seconds);
}

const bool registered_synth = register_command({
    "",
    "synth",
    "Write a model directory with seeded random weights shaped by a config.json",
    [](CLI::App& sub) {
      auto args = std::make_shared<SynthArgs>();
      sub.add_option("--config", args->config, "config.json of the model to imitate")->required();
      sub.add_option("--out", args->out,
                     "Output model directory: must not exist (it is created, with its parents) or be empty")
          ->required();
      sub.add_option("--seed", args->seed, "Random seed (same seed, same bytes)")->capture_default_str();
      sub.add_option("--dtype", args->dtype, "Weight dtype: bf16 or f32")->capture_default_str();
      sub.add_option("--tokenizer", args->tokenizer, "A tokenizer.json to copy into the directory");
      sub.add_flag("--embedding", args->embedding,
                   "Shape it as a Qwen3-Embedding checkpoint: no lm_head (the config must tie the embeddings), "
                   "tensors without the \"model.\" prefix, last-token pooling in 1_Pooling/config.json, and the "
                   "--tokenizer's post-processor appending <|endoftext|>");
      sub.callback([args] { synth(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
