// The Hugging Face hub's cache on disk, laid out as the hub's own tools (huggingface_hub,
// huggingface-cli) lay it, so that a model either side downloaded is the other's too:
//
//   $HF_HUB_CACHE/models--ORG--NAME/blobs/<etag>              the files' bytes, named by their
//                                                             sha256 (LFS) or git blob sha1
//                                  /snapshots/<commit>/<path>  relative symlinks to ../../blobs/<etag>
//                                  /refs/<revision>            the commit hash a branch or tag named
//
// and the model names that point into it: `-m ORG/NAME[@REVISION][:QUANT]` on every command
// resolves here (resolve_model_path), never over the network; `nanoinfer pull` fills it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer {

// "ORG/NAME[@REVISION][:QUANT]", as typed after `pull` or `-m`.
struct ModelRef {
  std::string repo;               // ORG/NAME
  std::string revision = "main";  // a branch, a tag or a commit hash
  std::string quant;              // a GGUF file's quantization (Q4_K_M), or empty
  bool revision_given = false;    // whether the text named the revision

  std::string text() const;  // as typed, with the revision only when one was given
};

// The reference `text` names, or nullopt when it is not of that form (an absolute or dotted
// path, a name ending in .gguf, more than one '/' before the revision, characters a hub
// repository name cannot hold).
std::optional<ModelRef> parse_model_ref(std::string_view text);

// The same, throwing a one-line Error that shows the expected form.
ModelRef model_ref_or_fail(std::string_view text);

// Where the hub cache is: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (the hub's own order).
std::filesystem::path hub_cache_dir();

// Whether HF_HUB_OFFLINE asks for no network access (1, true, yes or on, any case).
bool hub_offline();

// cache/models--ORG--NAME.
std::filesystem::path repo_cache_dir(const std::filesystem::path& cache, std::string_view repo);

// The snapshot directory the reference's revision names in the cache (through refs/<revision>,
// or the commit itself), or nullopt when the cache does not hold it.
std::optional<std::filesystem::path> cached_snapshot(const std::filesystem::path& cache, const ModelRef& ref);

// What a snapshot gives a command: the snapshot directory for a Hugging Face model
// (config.json), or the one GGUF file that `ref.quant` names. Throws a one-line Error when the
// choice is ambiguous (listing the choices) or nothing fits.
std::filesystem::path model_path_in_snapshot(const std::filesystem::path& snapshot, const ModelRef& ref);

// The model path a command's `-m TEXT` names. An empty text (the embedded model) and any text
// naming something on disk are returned as they are; ORG/NAME[@REVISION][:QUANT] is looked up
// in the hub cache, and when the cache does not hold it the Error says how to pull it. Never
// touches the network.
std::filesystem::path resolve_model_path(std::string_view text);

// "ORG/NAME" when `path` lies inside a snapshot of a hub cache (…/models--ORG--NAME/snapshots/
// <commit>[/file]), for naming a model after its repository rather than its commit directory.
std::optional<std::string> hub_repo_of_path(const std::filesystem::path& path);

struct CachedModel {
  std::string repo;                                       // ORG/NAME
  std::filesystem::path dir;                              // cache/models--ORG--NAME
  uint64_t bytes = 0;                                     // all its blobs, partial ones included
  std::vector<std::pair<std::string, std::string>> refs;  // revision -> commit
  std::vector<std::string> snapshots;                     // the commits held
  std::vector<std::string> gguf_quants;                   // the :QUANT of each GGUF file it holds
};

// The models in the cache, sorted by name (other kinds of repository, datasets and spaces,
// are left out).
std::vector<CachedModel> list_cached_models(const std::filesystem::path& cache);

// Deletes cache/models--ORG--NAME and returns the bytes its blobs held; an Error when the
// cache does not hold that model.
uint64_t remove_cached_model(const std::filesystem::path& cache, std::string_view repo);

}  // namespace nanoinfer
