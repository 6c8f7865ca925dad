#include "hub/hub_listing.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "hub/gguf_choice.h"
#include "hub/hub_names.h"
#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer::hub {

namespace {

constexpr size_t kMaxListingBytes = size_t{64} << 20;

bool is_hex(const std::string& s, size_t length) {
  return s.size() == length &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A repository path as a listing may give it: relative, no empty, "." or ".." parts. Anything
// else could write outside the snapshot, so a listing holding one is refused.
bool is_safe_repo_path(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string::npos) return false;
    start = end + 1;
  }
  return true;
}

RepoFile parse_sibling(const nlohmann::json& s, const ModelRef& ref) {
  RepoFile f;
  f.path = s.value("rfilename", "");
  if (!is_safe_repo_path(f.path))
    fail("{}: the hub listed an unusable file name '{}'", ref.text(), excerpt(f.path, 200));
  const nlohmann::json* lfs = s.contains("lfs") && s["lfs"].is_object() ? &s["lfs"] : nullptr;
  f.lfs = lfs != nullptr;
  f.etag = f.lfs ? lfs->value("sha256", "") : s.value("blobId", "");
  const nlohmann::json& size = f.lfs && lfs->contains("size") ? (*lfs)["size"] : s.value("size", nlohmann::json());
  if (!size.is_number_unsigned()) fail("{}: the hub listed {} without its size", ref.text(), escape_control(f.path));
  f.size = size.get<uint64_t>();
  if (!is_hex(f.etag, f.lfs ? 64 : 40))
    fail("{}: the hub listed {} without its checksum", ref.text(), escape_control(f.path));
  return f;
}

bool has(const RepoListing& l, const std::string& path) {
  return std::any_of(l.files.begin(), l.files.end(), [&](const RepoFile& f) { return f.path == path; });
}

bool top_level_with_suffix(const RepoFile& f, std::string_view suffix) {
  return f.path.find('/') == std::string::npos && f.path.ends_with(suffix);
}

std::vector<RepoFile> directory_files(const RepoListing& listing) {
  static const std::set<std::string> side_files = {"config.json",
                                                   "generation_config.json",
                                                   "tokenizer.json",
                                                   "tokenizer_config.json",
                                                   "special_tokens_map.json",
                                                   "vocab.json",
                                                   "merges.txt",
                                                   "tokenizer.model",
                                                   "added_tokens.json",
                                                   "chat_template.jinja",
                                                   "chat_template.json"};
  const bool sharded = has(listing, "model.safetensors.index.json");
  const bool single = has(listing, "model.safetensors");
  std::vector<RepoFile> out;
  for (const RepoFile& f : listing.files) {
    bool wanted = side_files.count(f.path) != 0;
    if (sharded) {
      wanted = wanted || f.path == "model.safetensors.index.json" || is_safetensors_shard(f.path);
    } else if (single) {
      wanted = wanted || f.path == "model.safetensors";
    } else {
      wanted = wanted || top_level_with_suffix(f, ".safetensors");
    }
    if (wanted) out.push_back(f);
  }
  return out;
}

}  // namespace

void fail_http(const HttpResult& r, const ModelRef& ref, const std::string& what, bool sent_token) {
  const auto message = r.headers.find("x-error-message");
  // The server's words and the endpoint (HF_ENDPOINT) reach the terminal only escaped.
  const std::string hub_says = message == r.headers.end() ? "" : fmt::format(": {}", excerpt(message->second, 300));
  switch (r.status) {
    case 401:
      fail("{}: {} answered 401 Unauthorized{} (the repository does not exist, or is private or gated: {})", ref.text(),
           what, hub_says, sent_token ? "the token sent has no access to it" : "set HF_TOKEN to a token with access");
    case 403:
      fail("{}: {} answered 403 Forbidden{} (a gated repository: accept its conditions on its page first)", ref.text(),
           what, hub_says);
    case 404:
      fail("{}: {} answered 404 Not Found{}", ref.text(), what, hub_says);
    default:
      fail("{}: {} answered HTTP {}{}", ref.text(), what, r.status, hub_says);
  }
}

RepoListing fetch_listing(HttpClient& http, const std::string& endpoint, const ModelRef& ref, bool sent_token) {
  const std::string url = fmt::format("{}/api/models/{}/revision/{}?blobs=true", endpoint, url_escape(ref.repo, true),
                                      url_escape(ref.revision, false));
  const HttpResult r = http.get_text(url, kMaxListingBytes);
  if (r.transfer_error != 0)
    fail("{}: cannot reach {}: {}", ref.text(), escape_control(endpoint), escape_control(r.transfer_message));
  if (r.status >= 400)
    fail_http(r, ref, fmt::format("{} (revision {})", escape_control(endpoint), ref.revision), sent_token);
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("siblings") || !j["siblings"].is_array())
    fail("{}: {} answered with no file listing (HTTP {})", ref.text(), escape_control(url), r.status);
  RepoListing listing;
  listing.commit = j.value("sha", "");
  if (!is_hex(listing.commit, 40)) fail("{}: the hub's listing names no commit", ref.text());
  for (const nlohmann::json& s : j["siblings"]) {
    if (!s.is_object()) fail("{}: the hub's listing holds a malformed entry", ref.text());
    listing.files.push_back(parse_sibling(s, ref));
  }
  return listing;
}

std::vector<RepoFile> model_files(const RepoListing& listing, const ModelRef& ref) {
  const bool has_gguf =
      std::any_of(listing.files.begin(), listing.files.end(), [](const RepoFile& f) { return is_gguf_name(f.path); });
  const bool has_weights = std::any_of(listing.files.begin(), listing.files.end(),
                                       [](const RepoFile& f) { return top_level_with_suffix(f, ".safetensors"); });
  const bool directory = has(listing, "config.json") && has_weights;
  if (ref.quant.empty() && directory) return directory_files(listing);
  if (!has_gguf) {
    if (!ref.quant.empty()) fail("{}: :{} names a GGUF file, but the repository has none", ref.text(), ref.quant);
    if (std::any_of(listing.files.begin(), listing.files.end(),
                    [](const RepoFile& f) { return top_level_with_suffix(f, ".bin"); })) {
      fail("{}: holds PyTorch .bin weights only; nanoinfer reads safetensors or GGUF", ref.text());
    }
    fail("{}: holds no model nanoinfer reads (config.json with *.safetensors, or a .gguf file) among its {} files",
         ref.text(), listing.files.size());
  }
  std::vector<std::string> paths;
  for (const RepoFile& f : listing.files) paths.push_back(f.path);
  const std::string chosen = choose_gguf(paths, ref.quant, ref.text());
  return {
      *std::find_if(listing.files.begin(), listing.files.end(), [&](const RepoFile& f) { return f.path == chosen; })};
}

}  // namespace nanoinfer::hub
