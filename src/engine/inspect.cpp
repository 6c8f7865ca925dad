// inspect_model: a model directory's or GGUF file's tensors against the manifest of its
// config, without loading any weights (nanoinfer/engine.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/gguf_config.h"
#include "model/manifest.h"
#include "model/quant_scheme.h"
#include "model/weight_source.h"
#include "nanoinfer/engine.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

namespace fs = std::filesystem;

// Values too: a NaN or infinity anywhere makes every logit garbage, so inspect reads every
// tensor the engine can widen once (pread, a row at a time) and names the first row that holds
// one. `read` copies bytes of the tensor from an offset; `widen` turns one row into f32.
std::optional<uint64_t> first_nonfinite_row(uint64_t rows, size_t row_bytes, size_t cols,
                                            const std::function<void(uint64_t, std::span<std::byte>)>& read,
                                            const std::function<void(const std::byte*, float*, size_t)>& widen) {
  std::vector<std::byte> staged(row_bytes);  // [row_bytes]
  std::vector<float> row(cols);              // [cols]
  for (uint64_t r = 0; r < rows; ++r) {
    read(r * row_bytes, staged);
    widen(staged.data(), row.data(), cols);
    if (!std::all_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); })) return r;
  }
  return std::nullopt;
}

ModelReport inspect_directory(const fs::path& dir) {
  ModelReport report;
  report.files = locate_model(dir);
  report.config = ModelConfig::load(report.files.config);
  const SafetensorsFile file = SafetensorsFile::open(report.files.weights);
  const std::vector<TensorSpec> manifest = tensor_manifest(report.config);
  report.file_bytes = file.file_size();
  report.header_bytes = file.layout().header_len;

  const std::map<std::string, WeightType> blocks = declared_block_types(file.layout(), file.path().string());
  if (const auto it = file.layout().metadata.find("nanoinfer.quantization"); it != file.layout().metadata.end()) {
    report.quantization = it->second;
  }
  std::map<std::string_view, const TensorSpec*> spec_of;
  for (const auto& spec : manifest) spec_of.emplace(spec.name, &spec);
  for (const TensorInfo& t : file.tensors()) {
    InspectedTensor& out = report.tensors.emplace_back();
    out.name = out.file_name = t.name;
    out.dtype = std::string(dtype_name(t.dtype));
    out.type = out.dtype;
    out.shape = out.stored_shape = t.shape;
    out.bytes = t.nbytes();
    out.params = t.numel();
    const auto it = spec_of.find(t.name);
    if (it != spec_of.end()) out.role = tensor_role_name(it->second->role);
    // A declared block tensor holds the weights of its manifest shape (when it matches; a
    // mismatch is reported as a problem below).
    if (const auto b = blocks.find(t.name); b != blocks.end() && it != spec_of.end() && it->second->is_matrix()) {
      out.type = std::string(weight_type_info(b->second).gguf_name);
      out.shape = it->second->shape;
      out.params = out.shape[0] * out.shape[1];
    }
  }
  report.problems = manifest_problems(manifest, file.tensors(), blocks);
  const WeightSource src = safetensors_source(file);
  for (const StoredTensor& t : src.tensors) {
    if (!t.widen_row || t.row_bytes == 0) continue;
    const auto row = first_nonfinite_row(
        t.nbytes / t.row_bytes, t.row_bytes, static_cast<size_t>(t.shape.empty() ? 1 : t.shape.back()),
        [&](uint64_t offset, std::span<std::byte> dst) { src.read(t, offset, dst); }, t.widen_row);
    if (row) report.problems.push_back(fmt::format("tensor '{}' holds a NaN or infinite value (row {})", t.name, *row));
  }
  return report;
}

// llama.cpp's names for its general.file_type numbers (its enum llama_ftype, without the
// MOSTLY_ prefix), for the types a qwen2 file commonly comes in; "" for the rest.
std::string_view file_type_name(uint32_t n) {
  switch (n) {
    case 0: return "ALL_F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K_S";
    case 12: return "Q3_K_M";
    case 13: return "Q3_K_L";
    case 14: return "Q4_K_S";
    case 15: return "Q4_K_M";
    case 16: return "Q5_K_S";
    case 17: return "Q5_K_M";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return "";
  }
}

// A non-negative integer value of any integer type; nullopt for anything else. The facts are
// informational, so a value of an unexpected type is left out rather than refused.
std::optional<uint64_t> uint_of(const GgufValue* v) {
  if (v == nullptr) return std::nullopt;
  return std::visit(
      [](const auto& x) -> std::optional<uint64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_signed_v<T>) {
            if (x < 0) return std::nullopt;
          }
          return static_cast<uint64_t>(x);
        } else {
          return std::nullopt;
        }
      },
      v->value);
}

std::string string_of(const GgufValue* v) {
  const auto* s = v == nullptr ? nullptr : std::get_if<std::string>(&v->value);
  return s == nullptr ? std::string() : *s;
}

uint64_t array_size_of(const GgufValue* v) {
  const auto* a = v == nullptr ? nullptr : std::get_if<GgufArray>(&v->value);
  return a == nullptr ? 0 : a->size();
}

GgufFacts gguf_facts(const GgufLayout& layout) {
  GgufFacts f;
  f.version = layout.version;
  f.alignment = layout.alignment;
  f.data_offset = layout.data_offset;
  f.metadata_keys = layout.metadata.size();
  f.architecture = string_of(layout.find("general.architecture"));
  f.name = string_of(layout.find("general.name"));
  if (const auto t = uint_of(layout.find("general.file_type")); t && *t <= UINT32_MAX) {
    f.file_type = static_cast<uint32_t>(*t);
    f.file_type_name = std::string(file_type_name(*f.file_type));
  }
  f.tokenizer_model = string_of(layout.find("tokenizer.ggml.model"));
  f.tokenizer_pre = string_of(layout.find("tokenizer.ggml.pre"));
  f.tokens = array_size_of(layout.find("tokenizer.ggml.tokens"));
  f.merges = array_size_of(layout.find("tokenizer.ggml.merges"));
  f.eos_token_id = uint_of(layout.find("tokenizer.ggml.eos_token_id"));
  f.chat_template = layout.find("tokenizer.chat_template") != nullptr;
  return f;
}

// A GGUF file: the config from its qwen2.* metadata (an architecture other than qwen2 is an
// Error naming it), each tensor under the Hugging Face name the manifest uses, and problems
// naming the file's own tensor names, which are what a GGUF tool shows.
ModelReport inspect_gguf(const fs::path& path) {
  ModelReport report;
  const GgufFile file = GgufFile::open(path);
  const GgufLayout& layout = file.layout();
  report.files = {path.parent_path(), path, path};
  report.config = config_from_gguf(layout);
  report.file_bytes = file.file_size();
  report.header_bytes = layout.data_offset;
  report.gguf = gguf_facts(layout);
  if (const GgufValue* q = layout.find("nanoinfer.quantization")) report.quantization = string_of(q);

  const std::vector<TensorSpec> manifest = tensor_manifest(report.config);
  std::map<std::string_view, const TensorSpec*> spec_of;
  for (const auto& spec : manifest) spec_of.emplace(spec.name, &spec);
  std::vector<TensorInfo> infos;  // what the manifest check sees: Hugging Face names, row-major
  std::vector<std::string> unmapped;
  for (const GgufTensorInfo& t : file.tensors()) {
    InspectedTensor& out = report.tensors.emplace_back();
    const std::optional<std::string> hf = hf_name_from_gguf(t.name);
    out.name = hf.value_or(t.name);
    out.file_name = t.name;
    out.dtype = out.type = std::string(ggml_type_info(t.type).name);
    out.shape = out.stored_shape = t.shape();
    out.bytes = t.nbytes;
    out.params = t.numel();
    if (!hf) {
      // Kept away from the manifest check: a GGUF tensor spelled like a Hugging Face one is
      // still not one the loader maps.
      unmapped.push_back(fmt::format("unexpected tensor '{}' (shape [{}]): not a tensor of a qwen2 model", t.name,
                                     fmt::join(out.shape, ", ")));
      continue;
    }
    if (const auto it = spec_of.find(out.name); it != spec_of.end()) out.role = tensor_role_name(it->second->role);
    TensorInfo& info = infos.emplace_back();
    info.name = out.name;
    info.dtype = DType::F32;  // not judged (U8 would draw the hint for safetensors blocks)
    info.shape = out.shape;
    info.end = t.nbytes;
  }
  // The manifest's messages name a tensor the Hugging Face way, first and in quotes; lead with
  // the file's own name.
  for (std::string problem : manifest_problems(manifest, infos)) {
    const size_t open = problem.find('\'');
    const size_t close = open == std::string::npos ? open : problem.find('\'', open + 1);
    if (close != std::string::npos) {
      const std::string hf = problem.substr(open + 1, close - open - 1);
      if (const auto g = gguf_name_from_hf(hf)) problem.replace(open, close - open + 1, fmt::format("'{}' ({})", *g, hf));
    }
    report.problems.push_back(std::move(problem));
  }
  report.problems.insert(report.problems.end(), unmapped.begin(), unmapped.end());

  for (const GgufTensorInfo& t : file.tensors()) {
    const uint64_t cols = t.dims.empty() ? 1 : t.dims[0];
    const size_t row_bytes = ggml_row_bytes(t.type, cols);
    if (row_bytes == 0) continue;  // no elements
    const GgmlType type = t.type;
    const auto row = first_nonfinite_row(
        t.nbytes / row_bytes, row_bytes, static_cast<size_t>(cols),
        [&](uint64_t offset, std::span<std::byte> dst) { file.read(t, offset, dst); },
        [type](const std::byte* src, float* dst, size_t n) { dequantize_row(type, src, dst, n); });
    if (!row) continue;
    const std::optional<std::string> hf = hf_name_from_gguf(t.name);
    report.problems.push_back(fmt::format("tensor '{}'{} holds a NaN or infinite value (row {})", t.name,
                                          hf ? fmt::format(" ({})", *hf) : "", *row));
  }
  return report;
}

}  // namespace

ModelReport inspect_model(const fs::path& path) {
  if (path.extension() == ".gguf" && !fs::is_directory(path)) {
    if (!fs::is_regular_file(path)) fail("{}: no such GGUF file", path.string());
    return inspect_gguf(path);
  }
  return inspect_directory(path);
}

}  // namespace nanoinfer
