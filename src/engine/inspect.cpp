// inspect_model: a model directory's or GGUF file's tensors against the manifest of its
// config, without loading any weights (nanoinfer/inspect.h).
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

#include "engine/model_source.h"
#include "io/gguf.h"
#include "model/manifest.h"
#include "model/weight_source.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/inspect.h"
#include "nanoinfer/tokenizer.h"

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

// llama.cpp's names for its general.file_type numbers (its enum llama_ftype, without the
// MOSTLY_ prefix), for the types a qwen2 file commonly comes in; "" for the rest.
std::string_view file_type_name(uint32_t n) {
  switch (n) {
    case 0:
      return "ALL_F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 3:
      return "Q4_1";
    case 7:
      return "Q8_0";
    case 8:
      return "Q5_0";
    case 9:
      return "Q5_1";
    case 10:
      return "Q2_K";
    case 11:
      return "Q3_K_S";
    case 12:
      return "Q3_K_M";
    case 13:
      return "Q3_K_L";
    case 14:
      return "Q4_K_S";
    case 15:
      return "Q4_K_M";
    case 16:
      return "Q5_K_S";
    case 17:
      return "Q5_K_M";
    case 18:
      return "Q6_K";
    case 32:
      return "BF16";
    default:
      return "";
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

}  // namespace

// One path for both formats: the engine opens the path as it does to load it (config and
// header read once), and every question is asked of the WeightSource. A GGUF file's tensors
// carry their Hugging Face names beside their own (problems lead with the file's name, which
// is what a GGUF tool shows), and its metadata adds the GGUF facts.
ModelReport inspect_model(const fs::path& path) {
  const std::unique_ptr<const ModelSource> src = open_model_source(path);
  const WeightSource& w = src->weights;
  ModelReport report;
  report.files = src->files;
  report.config = src->config;
  report.file_bytes = w.file_bytes;
  report.header_bytes = w.header_bytes;
  if (src->safetensors) report.shards = src->safetensors->shard_count();
  report.quantization = w.quantization;
  if (src->gguf) report.gguf = gguf_facts(src->gguf->layout());

  const std::vector<TensorSpec> manifest = tensor_manifest(report.config);
  std::map<std::string_view, const TensorSpec*> spec_of;
  for (const auto& spec : manifest) spec_of.emplace(spec.name, &spec);
  for (const StoredTensor& t : w.tensors) {
    InspectedTensor& out = report.tensors.emplace_back();
    out.name = t.name.empty() ? t.file_name : t.name;
    out.file_name = t.file_name;
    out.dtype = t.stored_type;
    out.type = t.type_name;
    out.shape = t.shape;
    out.stored_shape = t.stored_shape;
    out.bytes = t.nbytes;
    out.params = 1;
    for (const uint64_t d : t.shape) out.params *= d;
    if (const auto it = spec_of.find(t.name); it != spec_of.end()) out.role = tensor_role_name(it->second->role);
  }
  report.problems = w.problems(manifest);

  // The tokenizer, checked as generate checks it: a GGUF file's tokenizer.ggml.* arrays, or a
  // directory's tokenizer.json when it has one (weights alone are a valid directory to inspect).
  try {
    std::optional<Tokenizer> tokenizer;
    if (src->gguf || src->has("tokenizer.json")) tokenizer.emplace(load_tokenizer(*src));
    if (tokenizer && static_cast<uint64_t>(tokenizer->vocab_size()) > static_cast<uint64_t>(report.config.vocab_size)) {
      report.problems.push_back(fmt::format("the tokenizer has {} tokens but the model only {}",
                                            tokenizer->vocab_size(), report.config.vocab_size));
    }
  } catch (const Error& e) {
    // The message leads with the file's path, which the verdict names already.
    std::string_view why = e.what();
    const std::string lead = src->files.weights.string() + ": ";
    if (why.starts_with(lead)) why.remove_prefix(lead.size());
    report.problems.push_back(fmt::format("tokenizer: {}", why));
  }

  for (const StoredTensor& t : w.tensors) {
    if (!t.widen_row || t.row_bytes == 0) continue;  // a type the engine cannot widen, or no elements
    const auto row = first_nonfinite_row(
        t.nbytes / t.row_bytes, t.row_bytes, static_cast<size_t>(t.shape.empty() ? 1 : t.shape.back()),
        [&](uint64_t offset, std::span<std::byte> dst) { w.read(t, offset, dst); }, t.widen_row);
    if (!row) continue;
    const bool renamed = !t.name.empty() && t.name != t.file_name;
    report.problems.push_back(fmt::format("tensor '{}'{} holds a NaN or infinite value (row {})", t.file_name,
                                          renamed ? fmt::format(" ({})", t.name) : "", *row));
  }
  return report;
}

}  // namespace nanoinfer
