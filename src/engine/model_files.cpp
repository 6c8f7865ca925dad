#include "nanoinfer/model_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

namespace {
constexpr const char* kHowToGetOne =
    "get one with `nanoinfer pull Qwen/Qwen2.5-0.5B-Instruct` or `nanoinfer synth --config "
    "data/qwen2.5-0.5b-instruct/config.json --out models/synth-0.5b`";

// Whether the regular file `path` starts with GGUF's magic bytes (false when it cannot be read).
bool has_gguf_magic(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char magic[4] = {};
  const bool gguf = ::read(fd, magic, 4) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  ::close(fd);
  return gguf;
}

}  // namespace

ModelFiles locate_model(const std::filesystem::path& dir) {
  ModelFiles f{dir, dir / "config.json", dir / "model.safetensors"};
  // The path is the user's text: shown with its control characters escaped.
  const std::string shown = escape_control(dir.string());
  if (!std::filesystem::is_directory(dir)) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
      // Something is there: say what, and name the GGUF rule when that is what it is.
      if (S_ISREG(st.st_mode) && has_gguf_magic(dir)) {
        fail("{}: a GGUF file without the .gguf suffix; -m reads a GGUF file by its name (rename it to end in .gguf)",
             shown);
      }
      fail("{}: is {}, not a model directory (a directory with config.json and model.safetensors, or a .gguf file)",
           shown, file_kind_name(st.st_mode));
    }
    fail("{}: not a model directory ({})", shown, kHowToGetOne);
  }
  if (!std::filesystem::exists(f.config))
    fail("{}: not found; a model directory needs its config.json ({})", escape_control(f.config.string()),
         kHowToGetOne);
  if (!std::filesystem::exists(f.weights)) {
    // A sharded checkpoint: the index names the shards (SafetensorsFile::open_sharded).
    if (std::filesystem::exists(dir / "model.safetensors.index.json")) {
      f.weights = dir / "model.safetensors.index.json";
      return f;
    }
    fail("{}: not found ({})", escape_control(f.weights.string()), kHowToGetOne);
  }
  return f;
}

std::filesystem::path embedded_model_label() {
  return "(embedded)/default-model";
}

}  // namespace nanoinfer
