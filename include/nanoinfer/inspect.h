// What `inspect` reports of a model without loading it: every tensor of the file against the
// manifest its config implies. The model is a directory (config.json + model.safetensors) or a
// GGUF file (config from its qwen2.* metadata, tensors under their Hugging Face names).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nanoinfer/config.h"
#include "nanoinfer/model_files.h"

namespace nanoinfer {

struct InspectedTensor {
  std::string name;       // the Hugging Face name the manifest uses (a GGUF name that
                          // maps to none stays as it is, and is reported unexpected)
  std::string file_name;  // as named in the file: "blk.0.attn_q.weight" in GGUF; = name
  std::string dtype;      // as stored: "BF16", "F32", "U8", "Q4_K", ...
  // The weights' type: the GGUF name of a declared block type ("Q8_0", "Q4_0"), else dtype.
  std::string type;
  std::vector<uint64_t> shape;         // of the weights, row-major: [rows, cols] also for blocks
  std::vector<uint64_t> stored_shape;  // as stored: [rows, row_bytes] for safetensors block
                                       // tensors; = shape in GGUF (which stores elements)
  uint64_t bytes = 0;
  std::string role;     // "embedding", "attention", "mlp", "norm", "output"; "" if unknown
  uint64_t params = 0;  // weights (numel of `shape`)
};
// What a GGUF file says about itself beyond its tensors (the tokenizer fields are as stored,
// not validated: 0 / "" when absent).
struct GgufFacts {
  uint32_t version = 0;      // 2 or 3
  uint32_t alignment = 0;    // of the tensor data
  uint64_t data_offset = 0;  // file offset of the tensor data
  size_t metadata_keys = 0;
  std::string architecture;           // general.architecture
  std::string name;                   // general.name
  std::optional<uint32_t> file_type;  // general.file_type: llama.cpp's number for the file
  std::string file_type_name;         // "Q4_K_M", ... for the numbers llama.cpp defines; else ""
  std::string tokenizer_model;        // tokenizer.ggml.model ("gpt2")
  std::string tokenizer_pre;          // tokenizer.ggml.pre ("qwen2")
  uint64_t tokens = 0;                // entries of tokenizer.ggml.tokens
  uint64_t merges = 0;                // entries of tokenizer.ggml.merges
  std::optional<uint64_t> eos_token_id;
  bool chat_template = false;  // tokenizer.chat_template present
};
struct ModelReport {
  // For a GGUF file: dir its directory, config and weights the file itself.
  ModelFiles files;
  ModelConfig config;
  uint64_t file_bytes = 0;               // of every shard for a sharded checkpoint
  uint64_t header_bytes = 0;             // GGUF: everything before the tensor data
  size_t shards = 1;                     // the files the tensors are in (files.sharded())
  std::vector<InspectedTensor> tensors;  // in file order
  std::vector<std::string> problems;     // empty: the file matches the manifest
  // A quantized file's record of how it was made (__metadata__ or GGUF metadata
  // "nanoinfer.quantization", a JSON object as text); empty for a float file.
  std::string quantization;
  std::optional<GgufFacts> gguf;  // set for a GGUF file
};
// `path` is a model directory, or a file ending in .gguf. Throws a one-line Error for what
// cannot be read at all (missing files, a corrupt header, an unsupported architecture); a
// readable file's mismatches with the manifest and non-finite values are `problems`.
ModelReport inspect_model(const std::filesystem::path& path);

}  // namespace nanoinfer
