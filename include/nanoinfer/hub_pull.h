// `nanoinfer pull`: a model's files from the Hugging Face hub's public HTTP API into the hub
// cache (nanoinfer/hub_cache.h), the one place nanoinfer touches the network for a model.
//
// It asks the hub for the revision's commit and file listing with sizes and checksums
// (GET {endpoint}/api/models/ORG/NAME/revision/REV?blobs=true), chooses what a model needs (a
// Hugging Face directory's config, safetensors and tokenizer files, or the one GGUF file the
// :QUANT names), downloads each from {endpoint}/ORG/NAME/resolve/COMMIT/PATH (redirects
// followed) into blobs/<etag>.incomplete, resuming a partial file with a Range request, checks
// its sha256 (git blob sha1 for small files) against the listing, and only then renames it into
// place and links it into the snapshot. refs/REVISION is written last, so a model name resolves
// only once all its files are there.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "nanoinfer/hub_cache.h"

namespace nanoinfer {

struct PullProgress {
  std::string file;      // the repository path being downloaded
  size_t index = 0;      // which file of those downloaded (from 1)
  size_t count = 0;      // how many are downloaded
  uint64_t done = 0;     // bytes of the file on disk, a resumed part included
  uint64_t total = 0;    // the file's size
  uint64_t resumed = 0;  // bytes that were already on disk when this transfer started
};

struct PullOptions {
  std::filesystem::path cache;                        // the hub cache directory
  std::string endpoint;                               // e.g. https://huggingface.co, without a trailing '/'
  std::string token;                                  // sent as a Bearer token when not empty
  bool offline = false;                               // HF_HUB_OFFLINE: use the cache, never the network
  std::function<void(const PullProgress&)> progress;  // called as bytes arrive

  // The hub's own environment: HF_HUB_CACHE / HF_HOME (hub_cache_dir), HF_ENDPOINT (default
  // https://huggingface.co), HF_TOKEN (else the token file huggingface-cli login writes:
  // $HF_TOKEN_PATH or $HF_HOME/token), HF_HUB_OFFLINE.
  static PullOptions from_environment();
};

struct PullResult {
  std::string commit;
  std::filesystem::path model_path;  // what `-m` with the same name resolves to
  std::vector<std::string> files;    // the repository paths the model consists of
  uint64_t bytes = 0;                // their total size
  uint64_t downloaded = 0;           // bytes this pull transferred
  bool from_cache_offline = false;   // offline: the cached snapshot, the hub not asked
};

// Downloads what `ref` needs into the cache (files already there are kept) and returns where
// it is. Throws a one-line Error for an unreachable hub, a 401/403/404, a revision or quant
// that does not exist or is ambiguous, a cut connection (the partial file stays, for the next
// pull to resume), a full disk, or a checksum mismatch (the download is discarded).
PullResult pull_model(const ModelRef& ref, const PullOptions& options);

}  // namespace nanoinfer
