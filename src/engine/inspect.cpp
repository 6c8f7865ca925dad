// inspect_model: a model directory's tensors against the manifest of its config, without
// loading any weights (nanoinfer/engine.h).
#include <map>

#include "io/safetensors.h"
#include "model/manifest.h"
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

  std::map<std::string_view, const TensorSpec*> spec_of;
  for (const auto& spec : manifest) spec_of.emplace(spec.name, &spec);
  for (const TensorInfo& t : file.tensors()) {
    InspectedTensor& out = report.tensors.emplace_back();
    out.name = t.name;
    out.dtype = std::string(dtype_name(t.dtype));
    out.shape = t.shape;
    out.bytes = t.nbytes();
    out.params = t.numel();
    if (const auto it = spec_of.find(t.name); it != spec_of.end()) out.role = tensor_role_name(it->second->role);
  }
  report.problems = manifest_problems(manifest, file.tensors());
  return report;
}

}  // namespace nanoinfer
