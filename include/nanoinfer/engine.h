// Opening a model: the one library call that turns a model path into everything the commands
// run — the loaded Model, its tokenizer and its generation defaults — reading each file once.
// Subcommands parse flags, call open_model, and print; none of them assembles loading itself.
//
// A model path is a Hugging Face directory (config.json, model.safetensors, tokenizer.json,
// optional tokenizer_config.json and generation_config.json) or one GGUF file. An empty path
// means the embedded default model: data/default-model's files, built into the executable, so
// it needs no checkout and no file on disk (messages name it "(embedded)/default-model").
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/config.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/generation_config.h"
#include "nanoinfer/model.h"
#include "nanoinfer/quantize.h"
#include "nanoinfer/tokenizer.h"
#include "nanoinfer/tuning.h"

namespace nanoinfer {

// The files of a model directory that nanoinfer reads.
struct ModelFiles {
  std::filesystem::path dir;
  std::filesystem::path config;   // dir/config.json
  std::filesystem::path weights;  // dir/model.safetensors (single file; shards unsupported)
};

// Throws a one-line Error naming the missing file and how to get a model (the download script
// or `nanoinfer synth`).
ModelFiles locate_model(const std::filesystem::path& dir);

// How messages, `model:` lines and serve's model id name the embedded model (an empty model
// path): "(embedded)/default-model", a path whose last part is "default-model" and which is
// never read from disk.
std::filesystem::path embedded_model_label();

// The tuning cache: what `bench tune` measured (nanoinfer/tuning.h), one small JSON file per
// ISA and thread count, $XDG_CACHE_HOME/nanoinfer/tune-ISA-tN.json (else ~/.cache/nanoinfer/;
// empty when neither variable is an absolute path), holding the CPU model it was measured on.
std::filesystem::path tuning_cache_path(Isa isa, int threads);
// /proc/cpuinfo's model name ("unknown" when there is none): the cache's key, and the "cpu"
// of bench records.
std::string cpu_model_name();
struct TuningCache {
  std::filesystem::path file;
  std::shared_ptr<const Tuning> tuning;  // nullptr: no file, or one that was ignored
  std::string note;                      // one line when the file was ignored, and why
};
// A missing file is no tuning and no note. A file that is not a tuning file (corrupt,
// truncated, another format or version, a value out of range) or was measured on another CPU,
// ISA or thread count is ignored: no tuning, and `note` says why in one line.
TuningCache read_tuning_cache(const std::filesystem::path& file, std::string_view cpu, Isa isa, int threads);
// Writes it atomically (a temporary file beside it, renamed over it), creating its directory.
void write_tuning_cache(const std::filesystem::path& file, const Tuning& tuning, std::string_view cpu, Isa isa,
                        int threads);

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
};

// Opens `path` (a directory, a file ending in .gguf, or empty for the embedded model), checks the
// files, reads the weights file's header and the config once, loads the weights (the ISA
// checked first, by Model::load), the tokenizer and generation_config.json. Throws a one-line
// Error naming the problem: a missing file (and how to get a model), an unsupported ISA, a
// context past the model's limit, a tokenizer that does not belong to the model.
OpenedModel open_model(std::string_view path, const OpenOptions& options = {});

// The model alone, opened the same way (the same checks, each file read once) but without a
// tokenizer or generation defaults: for callers that push token ids, such as tests and
// calibration.
Model open_model_alone(const std::filesystem::path& path, const ModelOptions& options = {});

// Only the tokenizer of a model path (a directory's tokenizer.json, or a GGUF file's
// tokenizer.ggml.* arrays), without reading any weights: for `tokenize`.
Tokenizer open_tokenizer(std::string_view path);

// What `inspect` reports of a model without loading it: every tensor of the file against the
// manifest its config implies. The model is a directory (config.json + model.safetensors) or a
// GGUF file (config from its qwen2.* metadata, tensors under their Hugging Face names).
struct InspectedTensor {
  std::string name;              // the Hugging Face name the manifest uses (a GGUF name that
                                 // maps to none stays as it is, and is reported unexpected)
  std::string file_name;         // as named in the file: "blk.0.attn_q.weight" in GGUF; = name
  std::string dtype;             // as stored: "BF16", "F32", "U8", "Q4_K", ...
  // The weights' type: the GGUF name of a declared block type ("Q8_0", "Q4_0"), else dtype.
  std::string type;
  std::vector<uint64_t> shape;   // of the weights, row-major: [rows, cols] also for blocks
  std::vector<uint64_t> stored_shape;  // as stored: [rows, row_bytes] for safetensors block
                                       // tensors; = shape in GGUF (which stores elements)
  uint64_t bytes = 0;
  std::string role;              // "embedding", "attention", "mlp", "norm", "output"; "" if unknown
  uint64_t params = 0;           // weights (numel of `shape`)
};
// What a GGUF file says about itself beyond its tensors (the tokenizer fields are as stored,
// not validated: 0 / "" when absent).
struct GgufFacts {
  uint32_t version = 0;          // 2 or 3
  uint32_t alignment = 0;        // of the tensor data
  uint64_t data_offset = 0;      // file offset of the tensor data
  size_t metadata_keys = 0;
  std::string architecture;      // general.architecture
  std::string name;              // general.name
  std::optional<uint32_t> file_type;  // general.file_type: llama.cpp's number for the file
  std::string file_type_name;    // "Q4_K_M", ... for the numbers llama.cpp defines; else ""
  std::string tokenizer_model;   // tokenizer.ggml.model ("gpt2")
  std::string tokenizer_pre;     // tokenizer.ggml.pre ("qwen2")
  uint64_t tokens = 0;           // entries of tokenizer.ggml.tokens
  uint64_t merges = 0;           // entries of tokenizer.ggml.merges
  std::optional<uint64_t> eos_token_id;
  bool chat_template = false;    // tokenizer.chat_template present
};
struct ModelReport {
  // For a GGUF file: dir its directory, config and weights the file itself.
  ModelFiles files;
  ModelConfig config;
  uint64_t file_bytes = 0;
  uint64_t header_bytes = 0;              // GGUF: everything before the tensor data
  std::vector<InspectedTensor> tensors;   // in file order
  std::vector<std::string> problems;      // empty: the file matches the manifest
  // A quantized file's record of how it was made (__metadata__ or GGUF metadata
  // "nanoinfer.quantization", a JSON object as text); empty for a float file.
  std::string quantization;
  std::optional<GgufFacts> gguf;          // set for a GGUF file
};
// `path` is a model directory, or a file ending in .gguf. Throws a one-line Error for what
// cannot be read at all (missing files, a corrupt header, an unsupported architecture); a
// readable file's mismatches with the manifest and non-finite values are `problems`.
ModelReport inspect_model(const std::filesystem::path& path);

// Bytes of tensor data written so far, and the total: called as a GGUF file is written. It may
// throw to abort the write (e.g. on SIGINT); the temporary file is removed.
using GgufExportProgress = std::function<void(uint64_t done, uint64_t total)>;

// Writes the model directory (empty: the default model) as one GGUF file that llama.cpp and
// open_model load: matrices as `type` (nullopt: as stored; f32, bf16, int8 = Q8_0, int4 = Q4_0,
// rounded to nearest following the quantization scheme, so a tied embedding stays int8),
// norms and biases f32, the tokenizer as tokenizer.ggml.* arrays, the chat template. A tensor
// already of its target type is copied byte for byte. The file is written to a temporary name
// beside `out_file` and renamed into place when complete. Returns the bytes of tensor data.
// Throws a one-line Error, writing nothing, when `out_file` does not end in .gguf, exists, or
// its directory does not; when the disk lacks room; for a model that does not load.
uint64_t export_gguf(const std::filesystem::path& model_dir, const std::filesystem::path& out_file,
                     std::optional<WeightType> type, const GgufExportProgress& progress = {});

// quantize_model (nanoinfer/quantize.h) with one GGUF file as the output: the quantized model
// directory is built in a hidden directory beside `out_file`, written as GGUF with its blocks
// copied unchanged (so the file holds exactly the weights the directory would), and removed.
// Needs room for both at once. Progress as quantize_model's, then stage "gguf" (bytes of the
// file's tensor data). The result's `out` and `file_bytes` are the GGUF file's. Errors as
// quantize_model's and export_gguf's; any of them leaves neither file nor directory behind.
QuantizeResult quantize_to_gguf(std::string_view model_path, const std::filesystem::path& out_file,
                                const QuantizeOptions& options, const QuantizeProgressFn& progress = {});

}  // namespace nanoinfer
