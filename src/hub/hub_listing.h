// A revision's file listing from the hub's API, and the files of it a model needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hub/http_client.h"
#include "nanoinfer/hub_cache.h"

namespace nanoinfer::hub {

struct RepoFile {
  std::string path;  // in the repository, '/'-separated
  uint64_t size = 0;
  std::string etag;  // lfs.sha256 for an LFS file, else the git blob sha1 (the blob's name)
  bool lfs = false;
};

struct RepoListing {
  std::string commit;
  std::vector<RepoFile> files;
};

// GET {endpoint}/api/models/ORG/NAME/revision/REV?blobs=true, validated: a 40-hex commit,
// relative paths without "..", hex etags. An Error for an unreachable hub or an error status.
RepoListing fetch_listing(HttpClient& http, const std::string& endpoint, const ModelRef& ref, bool sent_token);

// What a model needs of the listing: a Hugging Face directory's config.json, tokenizer and
// generation files and its safetensors (the shards an index lists, or model.safetensors), or,
// for a GGUF repository or a ref with :QUANT, the one GGUF file chosen. An Error when the
// repository holds neither.
std::vector<RepoFile> model_files(const RepoListing& listing, const ModelRef& ref);

// One line for an error response (status >= 400) of the hub about `ref`, with the hub's
// X-Error-Message when it sent one.
[[noreturn]] void fail_http(const HttpResult& r, const ModelRef& ref, const std::string& what, bool sent_token);

}  // namespace nanoinfer::hub
