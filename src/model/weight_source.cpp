#include "model/weight_source.h"

#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/gguf.h"
#include "io/gguf_blocks.h"
#include "kernels/kernels.h"
#include "model/gguf_config.h"
#include "model/quant_scheme.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

const StoredTensor* WeightSource::find(std::string_view name) const {
  for (const StoredTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<TensorInfo> WeightSource::infos() const {
  std::vector<TensorInfo> out;
  for (const StoredTensor& t : tensors) {
    if (t.name.empty()) continue;  // maps to no manifest name: problems() names it
    TensorInfo info;
    info.name = t.name;
    // Not judged by the manifest check; not U8, which draws the hint about safetensors
    // block declarations.
    info.dtype = DType::F32;
    info.shape = t.shape;
    info.end = t.nbytes;
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<std::string> WeightSource::problems(const std::vector<TensorSpec>& manifest) const {
  std::vector<std::string> out;
  for (std::string problem : manifest_problems(manifest, manifest_infos, declared_blocks)) {
    // The manifest's messages name a tensor the Hugging Face way, first and in quotes; a GGUF
    // file's own name leads, as a GGUF tool shows it.
    const size_t open = problem.find('\'');
    const size_t close = open == std::string::npos ? open : problem.find('\'', open + 1);
    if (gguf_names && close != std::string::npos) {
      const std::string hf = problem.substr(open + 1, close - open - 1);
      if (const auto g = gguf_name_from_hf(hf))
        problem.replace(open, close - open + 1, fmt::format("'{}' ({})", *g, hf));
    }
    out.push_back(std::move(problem));
  }
  for (const StoredTensor& t : tensors) {
    // Kept away from the manifest check: a GGUF tensor spelled like a Hugging Face one is still
    // not one the loader maps.
    if (t.name.empty())
      out.push_back(fmt::format("unexpected tensor '{}' (shape [{}]): not a tensor of any supported architecture",
                                t.file_name, fmt::join(t.shape, ", ")));
  }
  return out;
}

namespace {

void widen_f32(const std::byte* row, float* out, size_t n) {
  std::memcpy(out, row, n * sizeof(float));
}
void widen_bf16(const std::byte* row, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    out[i] = bf16_to_f32(h);
  }
}
void widen_f16(const std::byte* row, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    out[i] = f16_to_f32(h);
  }
}

}  // namespace

namespace {

// A sentence-transformers checkpoint's bare names (model/manifest.h) are seen under the usual
// names; the file's own names stay in file_name.
void add_model_prefix(WeightSource& src) {
  std::vector<std::string> names;
  for (const StoredTensor& t : src.tensors) names.push_back(t.file_name);
  if (!stores_bare_model_names(names)) return;
  for (StoredTensor& t : src.tensors) t.name = prefixed_model_name(t.file_name);
  for (TensorInfo& info : src.manifest_infos) info.name = prefixed_model_name(info.name);
  std::map<std::string, WeightType> blocks;
  for (const auto& [name, type] : src.declared_blocks) blocks.emplace(prefixed_model_name(name), type);
  src.declared_blocks = std::move(blocks);
}

}  // namespace

WeightSource safetensors_source(const SafetensorsFile& file) {
  WeightSource src;
  src.path = file.path();
  // Quantized files declare which U8 tensors hold int8/int4 blocks (model/quant_scheme.h).
  const std::map<std::string, WeightType> blocks = declared_block_types(file.layout(), file.path().string());
  for (const TensorInfo& info : file.tensors()) {
    StoredTensor t;
    t.name = t.file_name = info.name;
    t.shape = t.stored_shape = info.shape;
    t.type_name = t.stored_type = std::string(dtype_name(info.dtype));
    t.nbytes = info.nbytes();
    const auto b = blocks.find(info.name);
    // A declaration that does not fit the tensor is left to the manifest check to report.
    if (b != blocks.end() && info.dtype == DType::U8 && info.shape.size() == 2 &&
        info.shape[1] % weight_type_info(b->second).block_bytes == 0) {
      // Stored [rows, row_bytes] of blocks; seen by the loader as [rows, cols] of the type.
      const WeightTypeInfo& wt = weight_type_info(b->second);
      const WeightType type = b->second;
      t.type_name = std::string(wt.gguf_name);
      t.shape = {info.shape[0], info.shape[1] / wt.block_bytes * wt.block_elems};
      t.row_bytes = static_cast<size_t>(info.shape[1]);
      t.exact = type;
      t.widen_row = [type](const std::byte* row, float* out, size_t n) { dequantize_row(type, row, out, n); };
      src.tensors.push_back(std::move(t));
      continue;
    }
    const uint64_t cols = info.shape.empty() ? 1 : info.shape.back();
    switch (info.dtype) {
      case DType::F32:
        t.exact = WeightType::F32, t.widen_row = widen_f32;
        break;
      case DType::BF16:
        t.exact = WeightType::BF16, t.widen_row = widen_bf16;
        break;
      case DType::F16:
        t.widen_row = widen_f16;
        break;
      default:
        break;  // rejected by the loader, naming the type
    }
    t.row_bytes = static_cast<size_t>(cols * dtype_size(info.dtype));
    src.tensors.push_back(std::move(t));
  }
  src.manifest_infos = file.tensors();
  src.declared_blocks = blocks;
  add_model_prefix(src);
  src.file_bytes = file.file_size();
  src.header_bytes = file.layout().header_len;
  if (const auto q = file.layout().metadata.find("nanoinfer.quantization"); q != file.layout().metadata.end()) {
    src.quantization = q->second;
  }
  src.read = [&file](const StoredTensor& t, uint64_t offset, std::span<std::byte> dst) {
    file.read(*file.find(t.file_name), offset, dst);
  };
  return src;
}

WeightSource gguf_source(const GgufFile& file) {
  WeightSource src;
  src.path = file.path();
  src.gguf_names = true;
  for (const GgufTensorInfo& info : file.tensors()) {
    StoredTensor t;
    t.name = hf_name_from_gguf(info.name).value_or("");
    t.file_name = info.name;
    t.shape = t.stored_shape = info.shape();
    const GgmlType type = info.type;
    t.type_name = t.stored_type = std::string(ggml_type_info(static_cast<uint32_t>(type))->name);
    t.nbytes = info.nbytes;
    t.row_bytes = ggml_row_bytes(type, info.dims.empty() ? 1 : info.dims[0]);
    t.exact = weight_type_from_gguf(static_cast<uint32_t>(type));
    t.widen_row = [type](const std::byte* row, float* out, size_t n) { dequantize_row(type, row, out, n); };
    src.tensors.push_back(std::move(t));
  }
  src.manifest_infos = src.infos();
  src.file_bytes = file.file_size();
  src.header_bytes = file.layout().data_offset;
  if (const GgufValue* q = file.layout().find("nanoinfer.quantization")) {
    if (const auto* text = std::get_if<std::string>(&q->value)) src.quantization = *text;
  }
  src.read = [&file](const StoredTensor& t, uint64_t offset, std::span<std::byte> dst) {
    file.read(file.get(t.file_name), offset, dst);
  };
  return src;
}

}  // namespace nanoinfer
