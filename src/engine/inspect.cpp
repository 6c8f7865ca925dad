// inspect_model: a model directory's tensors against the manifest of its config, without
// loading any weights (nanoinfer/engine.h).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "io/safetensors.h"
#include "model/manifest.h"
#include "model/weight_source.h"
#include "model/quant_scheme.h"
#include "nanoinfer/engine.h"

namespace nanoinfer {

ModelReport inspect_model(const std::filesystem::path& dir) {
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
    out.name = t.name;
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
  // Values too: a NaN or infinity anywhere makes every logit garbage, so inspect reads every
  // float tensor once (pread, a row at a time) and names the first tensor that holds one.
  const WeightSource src = safetensors_source(file);
  for (const StoredTensor& t : src.tensors) {
    if (!t.widen_row || t.row_bytes == 0) continue;
    const uint64_t rows = t.nbytes / t.row_bytes;
    const size_t cols = static_cast<size_t>(t.shape.empty() ? 1 : t.shape.back());
    std::vector<std::byte> staged(t.row_bytes);
    std::vector<float> row(cols);
    for (uint64_t r = 0; r < rows; ++r) {
      src.read(t, r * t.row_bytes, staged);
      t.widen_row(staged.data(), row.data(), cols);
      if (!std::all_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); })) {
        report.problems.push_back(fmt::format("tensor '{}' holds a NaN or infinite value (row {})", t.name, r));
        break;
      }
    }
  }
  return report;
}

}  // namespace nanoinfer
