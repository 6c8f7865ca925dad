// The int8 and int4 forward against the float64 reference's simulation of the same
// quantization (tools/reference/quant_reference.py), and the file path against the load path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model.h"
#include "nanoinfer/quantize.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

fs::path models_root() { return fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models"; }

std::vector<fs::path> tiny_model_dirs() {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(models_root()))
    if (entry.is_directory() && fs::exists(entry.path() / "reference.safetensors")) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

template <class T>
std::vector<T> read_tensor(const SafetensorsFile& f, const std::string& name) {
  const TensorView t = f.get(name);
  std::vector<T> out(t.nbytes() / sizeof(T));
  std::memcpy(out.data(), t.data, t.nbytes());
  return out;
}

size_t prompt_count(const SafetensorsFile& f) {
  size_t k = 0;
  while (f.find("prompt." + std::to_string(k)) != nullptr) ++k;
  return k;
}

Model load(const fs::path& dir, std::optional<WeightType> weights, int threads = 2) {
  ModelOptions o;
  o.weights = weights;
  o.threads = threads;
  return Model::load(dir, o);
}

std::vector<float> all_logits(const Model& model, const std::vector<int32_t>& tokens) {
  Sequence seq = model.new_sequence();
  const auto out = model.forward(tokens, seq, true);
  return {out.begin(), out.end()};
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<int32_t> greedy(const Model& model, const std::vector<int32_t>& prompt, size_t n) {
  Sequence seq = model.new_sequence();
  std::vector<int32_t> out;
  int32_t next = argmax(model.forward(prompt, seq));
  for (size_t i = 0; i < n; ++i) {
    out.push_back(next);
    if (i + 1 < n) next = argmax(model.forward({&next, 1}, seq));
  }
  return out;
}

struct Kind {
  WeightType type;
  const char* name;
};
constexpr Kind kKinds[] = {{WeightType::Q8_0, "int8"}, {WeightType::Q4_0, "int4"}};

TEST(QuantReference, Measure) {
  for (const auto& dir : tiny_model_dirs()) {
    const SafetensorsFile ref = SafetensorsFile::open(dir / "reference.safetensors");
    for (const Kind& kind : kKinds) {
      const Model model = load(dir, kind.type);
      for (size_t k = 0; k < prompt_count(ref); ++k) {
        const auto K = std::to_string(k);
        const auto got = all_logits(model, read_tensor<int32_t>(ref, "prompt." + K));
        const auto want = read_tensor<float>(ref, std::string("logits_") + kind.name + "." + K);
        const auto exact = read_tensor<float>(ref, "logits." + K);
        float d = 0, dq = 0, scale = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          d = std::max(d, std::abs(got[i] - want[i]));
          dq = std::max(dq, std::abs(want[i] - exact[i]));
          scale = std::max(scale, std::abs(exact[i]));
        }
        const size_t V = static_cast<size_t>(model.vocab_size());
        size_t first = got.size() / V;
        for (size_t i = 0; i < got.size(); ++i)
          if (std::abs(got[i] - want[i]) > 1e-4f) { first = i / V; break; }
        const auto g = greedy(model, read_tensor<int32_t>(ref, "prompt." + K), 8);
        const auto gw = read_tensor<int32_t>(ref, std::string("greedy_") + kind.name + "." + K);
        std::printf("  %-12s %s prompt %zu: |engine - sim| %.3g (first pos > 1e-4: %zu of %zu), |sim - exact| %.3g, scale %.3g greedy %s\n",
                    dir.filename().c_str(), kind.name, k, d, first, got.size() / V, dq, scale, g == gw ? "same" : "DIFF");
      }
    }
  }
}

}  // namespace
}  // namespace nanoinfer
