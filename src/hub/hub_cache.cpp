// The hub cache's layout and the model names that point into it (nanoinfer/hub_cache.h).
#include "nanoinfer/hub_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <system_error>

#include "hub/gguf_choice.h"
#include "hub/hub_names.h"
#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

namespace fs = std::filesystem;

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// The bytes a directory tree's regular files hold (symlinks not followed, so a snapshot's links
// count nothing and each blob counts once).
uint64_t tree_bytes(const fs::path& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) bytes += it->file_size(ec);
  }
  return bytes;
}

// The files of a snapshot, as paths relative to it.
std::vector<std::string> snapshot_files(const fs::path& snapshot) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snapshot, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_directory(ec)) files.push_back(it->path().lexically_relative(snapshot).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_small_file(const fs::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  char buf[256];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  std::string text(buf, n);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

}  // namespace

std::string ModelRef::text() const {
  std::string t = repo;
  if (revision_given) t += "@" + revision;
  if (!quant.empty()) t += ":" + quant;
  return t;
}

std::optional<ModelRef> parse_model_ref(std::string_view text) {
  if (text.empty() || hub::is_gguf_name(text)) return std::nullopt;
  ModelRef ref;
  const size_t at = text.find('@');
  const size_t colon = text.rfind(':');
  if (colon != std::string_view::npos && (at == std::string_view::npos || colon > at)) {
    ref.quant = std::string(text.substr(colon + 1));
    text = text.substr(0, colon);
    if (!hub::is_name_part(ref.quant)) return std::nullopt;
  }
  if (at != std::string_view::npos) {
    ref.revision = std::string(text.substr(at + 1));
    ref.revision_given = true;
    text = text.substr(0, at);
    if (!hub::is_revision(ref.revision)) return std::nullopt;
  }
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos || !hub::is_name_part(text.substr(0, slash)) ||
      !hub::is_name_part(text.substr(slash + 1)))
    return std::nullopt;
  ref.repo = std::string(text);
  return ref;
}

ModelRef model_ref_or_fail(std::string_view text) {
  std::optional<ModelRef> ref = parse_model_ref(text);
  if (!ref)
    fail("'{}': not a model name of the form ORG/NAME[@REVISION][:QUANT] (e.g. Qwen/Qwen2.5-0.5B-Instruct)",
         escape_control(text));
  return *ref;
}

fs::path hub_cache_dir() {
  if (std::string v = env_or_empty("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = env_or_empty("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
  if (std::string v = env_or_empty("XDG_CACHE_HOME"); !v.empty()) return fs::path(v) / "huggingface" / "hub";
  const std::string home = env_or_empty("HOME");
  if (home.empty()) fail("cannot place the Hugging Face cache: set HF_HOME or HOME");
  return fs::path(home) / ".cache" / "huggingface" / "hub";
}

bool hub_offline() {
  std::string v = env_or_empty("HF_HUB_OFFLINE");
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

fs::path repo_cache_dir(const fs::path& cache, std::string_view repo) {
  // ORG/NAME -> models--ORG--NAME (a hub name never holds "--" itself).
  const size_t slash = repo.find('/');
  return cache / fmt::format("models--{}--{}", repo.substr(0, slash), repo.substr(slash + 1));
}

std::optional<fs::path> cached_snapshot(const fs::path& cache, const ModelRef& ref) {
  const fs::path repo = repo_cache_dir(cache, ref.repo);
  std::string commit = ref.revision;
  if (!hub::is_commit_hash(commit)) commit = read_small_file(repo / "refs" / ref.revision);
  if (!hub::is_commit_hash(commit)) return std::nullopt;
  const fs::path snapshot = repo / "snapshots" / commit;
  std::error_code ec;
  if (!fs::is_directory(snapshot, ec)) return std::nullopt;
  return snapshot;
}

fs::path model_path_in_snapshot(const fs::path& snapshot, const ModelRef& ref) {
  std::error_code ec;
  if (ref.quant.empty() && fs::exists(snapshot / "config.json", ec)) return snapshot;
  const std::vector<std::string> files = snapshot_files(snapshot);
  if (std::none_of(files.begin(), files.end(), [](const std::string& f) { return hub::is_gguf_name(f); })) {
    if (!ref.quant.empty()) fail("{}: the cached model has no GGUF file to choose {} from", ref.text(), ref.quant);
    fail("{}: the cached snapshot {} holds neither config.json nor a GGUF file (pull it again)", ref.text(),
         escape_control(snapshot.string()));
  }
  return snapshot / hub::choose_gguf(files, ref.quant, ref.text());
}

fs::path resolve_model_path(std::string_view text) {
  if (text.empty()) return {};
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(fs::path(text), ec);
  // Anything on disk (or a path that cannot be examined) is a path: its own checks report it.
  if (status.type() != fs::file_type::not_found) return fs::path(text);
  const std::optional<ModelRef> ref = parse_model_ref(text);
  if (!ref) return fs::path(text);
  const fs::path cache = hub_cache_dir();
  const std::optional<fs::path> snapshot = cached_snapshot(cache, *ref);
  if (!snapshot) {
    fail(
        "{}: no such file or directory, nor a model in the Hugging Face cache {} (download it with `nanoinfer pull "
        "{}`)",
        escape_control(text), escape_control(cache.string()), ref->text());
  }
  return model_path_in_snapshot(*snapshot, *ref);
}

std::optional<std::string> hub_repo_of_path(const fs::path& path) {
  // …/models--ORG--NAME/snapshots/COMMIT[/file]: find the snapshots part with its neighbours.
  const fs::path normal = path.lexically_normal();
  const std::vector<fs::path> parts(normal.begin(), normal.end());
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    const std::string repo = parts[i - 1].string();
    const size_t sep = repo.find("--", 8);
    if (parts[i] != "snapshots" || !repo.starts_with("models--") || sep == std::string::npos ||
        !hub::is_commit_hash(parts[i + 1].string()))
      continue;
    const std::string org = repo.substr(8, sep - 8), name = repo.substr(sep + 2);
    if (hub::is_name_part(org) && hub::is_name_part(name)) return org + "/" + name;
  }
  return std::nullopt;
}

std::vector<CachedModel> list_cached_models(const fs::path& cache) {
  std::vector<CachedModel> models;
  std::error_code ec;
  for (auto it = fs::directory_iterator(cache, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t sep = name.find("--", 8);
    if (!name.starts_with("models--") || sep == std::string::npos || !it->is_directory(ec)) continue;
    CachedModel m;
    m.repo = name.substr(8, sep - 8) + "/" + name.substr(sep + 2);
    m.dir = it->path();
    m.bytes = tree_bytes(m.dir / "blobs");
    for (const std::string& r : snapshot_files(m.dir / "refs"))
      m.refs.emplace_back(r, read_small_file(m.dir / "refs" / r));
    for (auto s = fs::directory_iterator(m.dir / "snapshots", ec); !ec && s != fs::directory_iterator();
         s.increment(ec)) {
      m.snapshots.push_back(s->path().filename().string());
      for (const std::string& f : snapshot_files(s->path()))
        if (hub::is_gguf_name(f)) m.gguf_quants.push_back(hub::gguf_quant_label(f));
    }
    ec.clear();
    std::sort(m.snapshots.begin(), m.snapshots.end());
    std::sort(m.gguf_quants.begin(), m.gguf_quants.end());
    m.gguf_quants.erase(std::unique(m.gguf_quants.begin(), m.gguf_quants.end()), m.gguf_quants.end());
    models.push_back(std::move(m));
  }
  std::sort(models.begin(), models.end(), [](const CachedModel& a, const CachedModel& b) { return a.repo < b.repo; });
  return models;
}

uint64_t remove_cached_model(const fs::path& cache, std::string_view repo) {
  const fs::path dir = repo_cache_dir(cache, repo);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("{}: not in the Hugging Face cache {}", escape_control(repo), escape_control(cache.string()));
  const uint64_t bytes = tree_bytes(dir / "blobs");
  fs::remove_all(dir, ec);
  if (ec) fail("{}: cannot remove {}: {}", escape_control(repo), escape_control(dir.string()), ec.message());
  return bytes;
}

}  // namespace nanoinfer
