#include "engine/model_source.h"

#include <unistd.h>

#include <algorithm>

#include "engine/default_model.h"
#include "model/gguf_config.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/hub_cache.h"
#include "nanoinfer/json_limits.h"
#include "nanoinfer/kv_cache.h"
#include "tokenizer/tokenizer_gguf.h"

namespace nanoinfer {

bool is_gguf_path(const std::filesystem::path& path) {
  if (path.empty() || path.extension() != ".gguf" || std::filesystem::is_directory(path)) return false;
  if (!path_exists(path)) fail("{}: no such GGUF file", escape_control(path.string()));
  require_regular_file(path);  // a FIFO or a device named x.gguf: says what it is
  return true;
}

namespace {

// The default model's bytes, viewed where the executable holds them: nothing is copied until
// the weight loader reads the tensors into its arena, as it reads a file.
std::unique_ptr<const ModelSource> open_embedded() {
  auto src = std::make_unique<ModelSource>();
  const std::filesystem::path dir = embedded_model_label();
  src->files = {dir, dir / "config.json", dir / "model.safetensors"};
  src->embedded = true;
  const auto config = embedded_file("config.json");
  const auto weights = embedded_file("model.safetensors");
  if (!config || !weights) fail("{}: the executable was built without the default model's files", dir.string());
  src->config = ModelConfig::parse(std::string_view(reinterpret_cast<const char*>(config->data()), config->size()),
                                   src->files.config.string());
  src->weights = safetensors_source(src->safetensors.emplace(SafetensorsFile::over(*weights, src->files.weights)));
  return src;
}

std::unique_ptr<const ModelSource> open_directory(const std::filesystem::path& path) {
  if (path.empty()) return open_embedded();
  auto src = std::make_unique<ModelSource>();
  src->files = locate_model(path);
  src->config = ModelConfig::load(src->files.config);
  const std::filesystem::path& weights = src->files.weights;
  src->weights = safetensors_source(src->safetensors.emplace(
      src->files.sharded() ? SafetensorsFile::open_sharded(weights) : SafetensorsFile::open(weights)));
  return src;
}

}  // namespace

std::unique_ptr<const ModelSource> open_model_source(const std::filesystem::path& model) {
  const std::filesystem::path path = resolve_model_path(model.string());
  if (!is_gguf_path(path)) return open_directory(path);
  // A GGUF file carries everything in one: config, tokenizer, eos ids and the weights.
  auto src = std::make_unique<ModelSource>();
  src->files = {path.parent_path(), path, path};
  const GgufFile& file = src->gguf.emplace(GgufFile::open(path));
  src->config = config_from_gguf(file.layout());
  src->weights = gguf_source(file);
  return src;
}

std::optional<std::string> ModelSource::read_text(std::string_view name, uint64_t max_bytes) const {
  const std::filesystem::path path = path_of(name);
  if (embedded) {
    const auto bytes = embedded_file(name);
    if (!bytes) return std::nullopt;
    if (bytes->size() > max_bytes) fail("{}: larger than the limit of {} bytes", path.string(), max_bytes);
    return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  }
  if (!path_exists(path)) return std::nullopt;
  return read_file(path, max_bytes);
}

bool ModelSource::has(std::string_view name) const {
  return embedded ? embedded_file(name).has_value() : path_exists(path_of(name));
}

Tokenizer load_tokenizer(const ModelSource& src) {
  if (src.gguf) return tokenizer_from_gguf(src.gguf->layout());
  const std::optional<std::string> json = src.read_text("tokenizer.json", kMaxTokenizerFileBytes);
  if (!json) fail("{}: not found", src.path_of("tokenizer.json").string());
  return Tokenizer::from_json(*json, src.read_text("tokenizer_config.json", kMaxConfigFileBytes).value_or(""),
                              src.path_of("tokenizer.json").string());
}

std::unique_ptr<const ModelSource> open_model_directory(const std::filesystem::path& model) {
  const std::filesystem::path path = resolve_model_path(model.string());
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
  // A sequence reserves its KV cache for the whole context and commits it as positions are
  // used (nanoinfer/kv_cache.h, which refuses a growth past the available memory with a
  // one-line error); the RoPE tables are computed for the whole context up front. A -c whose
  // cache could not fit in this machine's memory even when full is refused here, naming the
  // flag and the sizes; the default context (the model's) is lowered to what fits instead.
  const ModelConfig& c = src.config;
  ModelOptions resolved = options;
  const uint64_t per_position =
      dtype_size(options.kv_type) * 2 * static_cast<uint64_t>(c.num_hidden_layers) * static_cast<uint64_t>(c.kv_dim()) +
      4 * static_cast<uint64_t>(c.head_dim());
  const uint64_t memory =
      static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
  const uint64_t ctx = options.max_context;
  if (ctx > 0 && memory > 0 && ctx > memory / per_position) {
    fail(
        "-c {}: a context of {} positions needs {:.1f} GiB for its KV cache and RoPE tables, more than this "
        "machine's {:.1f} GiB of memory (KV cache in {}: --kv-type and -c set its size)",
        ctx, ctx, static_cast<double>(ctx) * static_cast<double>(per_position) / (1 << 30),
        static_cast<double>(memory) / (1 << 30), kv_type_name(options.kv_type));
  }
  if (ctx == 0 && memory > 0) {
    const uint64_t fits = memory / per_position;
    if (fits < static_cast<uint64_t>(c.max_position_embeddings)) resolved.max_context = std::max<uint64_t>(fits, 1);
  }
  return Model::load(src.config, src.weights, resolved);
}

}  // namespace nanoinfer
