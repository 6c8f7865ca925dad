// Opening a model: the one library call that turns a model path into everything the commands
// run — the loaded Model, its tokenizer and its generation defaults — reading each file once.
// Subcommands parse flags, call open_model, and print; none of them assembles loading itself.
//
// A model path is a Hugging Face directory (config.json, model.safetensors, tokenizer.json,
// optional tokenizer_config.json and generation_config.json) or one GGUF file. An empty path
// means the embedded default model: data/default-model's files, built into the executable, so
// it needs no checkout and no file on disk (messages name it "(embedded)/default-model").
#pragma once

#include <filesystem>
#include <string_view>

#include "nanoinfer/embedding.h"
#include "nanoinfer/generation_config.h"
#include "nanoinfer/model.h"
#include "nanoinfer/tokenizer.h"
#include "nanoinfer/tuning_cache.h"

namespace nanoinfer {

struct OpenOptions {
  ModelOptions model;
  // Read the tuning cache of the ISA and thread count the model runs with (the commands do,
  // unless --no-tune); ignored when model.tuning is already set.
  bool use_tuning_cache = false;
};

struct OpenedModel {
  std::filesystem::path dir;
  Model model;
  Tokenizer tokenizer;
  GenerationConfig generation;
  double load_seconds = 0;  // config + weights + tokenizer
  TuningCache tuning;       // what use_tuning_cache found (file, rules, or why it was ignored)
  ModelPooling pooling;     // what the files say about embedding pooling (nanoinfer/embedding.h)
};

// Opens `path` (a directory, a file ending in .gguf, or empty for the embedded model), checks the
// files, reads the weights file's header and the config once, loads the weights (the ISA
// checked first, by Model::load), the tokenizer and generation_config.json. Throws a one-line
// Error naming the problem: a missing file (and how to get a model), an unsupported ISA, a
// context past the model's limit, a tokenizer that does not belong to the model.
// On a follower rank of a tensor-parallel run (mpirun, docs/SCALING.md) it does not return:
// the rank runs rank 0's steps (Model::follow) and the process exits 0 when rank 0's model is
// destroyed.
OpenedModel open_model(std::string_view path, const OpenOptions& options = {});

// The model alone, opened the same way (the same checks, each file read once) but without a
// tokenizer or generation defaults: for callers that push token ids, such as tests and
// calibration.
Model open_model_alone(const std::filesystem::path& path, const ModelOptions& options = {});

// Only the tokenizer of a model path (a directory's tokenizer.json, or a GGUF file's
// tokenizer.ggml.* arrays), without reading any weights: for `tokenize`.
Tokenizer open_tokenizer(std::string_view path);

}  // namespace nanoinfer
