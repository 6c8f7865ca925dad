#include "engine/model_source.h"

#include <unistd.h>

#include "model/gguf_config.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer {

bool is_gguf_path(const std::filesystem::path& path) {
  if (path.extension() != ".gguf" || std::filesystem::is_directory(path)) return false;
  if (!path_exists(path)) fail("{}: no such GGUF file", path.string());
  require_regular_file(path);  // a FIFO or a device named x.gguf: says what it is
  return true;
}

namespace {

std::unique_ptr<const ModelSource> open_directory(const std::filesystem::path& path) {
  auto src = std::make_unique<ModelSource>();
  src->files = locate_model(path);
  src->config = ModelConfig::load(src->files.config);
  src->weights = safetensors_source(src->safetensors.emplace(SafetensorsFile::open(src->files.weights)));
  return src;
}

}  // namespace

std::unique_ptr<const ModelSource> open_model_source(const std::filesystem::path& path) {
  if (!is_gguf_path(path)) return open_directory(path);
  // A GGUF file carries everything in one: config, tokenizer, eos ids and the weights.
  auto src = std::make_unique<ModelSource>();
  src->files = {path.parent_path(), path, path};
  const GgufFile& file = src->gguf.emplace(GgufFile::open(path));
  src->config = config_from_gguf(file.layout());
  src->weights = gguf_source(file);
  return src;
}

std::unique_ptr<const ModelSource> open_model_directory(const std::filesystem::path& path) {
  if (is_gguf_path(path)) {
    fail("{}: a GGUF file; this reads a model directory (config.json + model.safetensors)", path.string());
  }
  return open_directory(path);
}

Model load_model(const ModelSource& src, const ModelOptions& options) {
  if (options.max_context > static_cast<size_t>(src.config.max_position_embeddings)) {
    fail("-c {} exceeds the model's limit of {} positions ({})", options.max_context,
         src.config.max_position_embeddings, src.gguf ? "context_length" : "max_position_embeddings");
  }
  // The KV cache of a sequence and the RoPE tables are sized by the context up front: a -c
  // within a (possibly hostile) config's limit can still need more than the machine has, which
  // used to end in bad_alloc. Refused here, naming the flag and the sizes.
  const ModelConfig& c = src.config;
  const uint64_t ctx = options.max_context;
  const uint64_t per_position = 4 * (2 * static_cast<uint64_t>(c.num_hidden_layers) * static_cast<uint64_t>(c.kv_dim()) +
                                     static_cast<uint64_t>(c.head_dim()));
  const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
  if (ctx > 0 && memory > 0 && ctx > memory / per_position) {
    fail("-c {}: a context of {} positions needs {:.1f} GiB for its KV cache and RoPE tables, more than this "
         "machine's {:.1f} GiB of memory",
         ctx, ctx, static_cast<double>(ctx) * static_cast<double>(per_position) / (1 << 30),
         static_cast<double>(memory) / (1 << 30));
  }
  return Model::load(src.config, src.weights, options);
}

}  // namespace nanoinfer
