// pull_model: the hub's files into the hub cache (nanoinfer/hub_pull.h).
#include "nanoinfer/hub_pull.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "hub/file_digest.h"
#include "hub/http_client.h"
#include "hub/hub_listing.h"
#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

namespace fs = std::filesystem;
using hub::RepoFile;

namespace {

// A path or file name in a message: a hostile listing's names and the cache's path (from the
// environment) reach the terminal with their control characters escaped.
std::string shown(const fs::path& path) {
  return escape_control(path.string());
}

std::string getenv_string(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

// The token the hub's tools would send: HF_TOKEN, else the file `huggingface-cli login` wrote.
std::string token_from_environment() {
  std::string token = trimmed(getenv_string("HF_TOKEN"));
  if (token.empty()) {
    fs::path file = getenv_string("HF_TOKEN_PATH");
    if (file.empty()) {
      const std::string home = getenv_string("HF_HOME");
      if (!home.empty()) {
        file = fs::path(home) / "token";
      } else if (const std::string xdg = getenv_string("XDG_CACHE_HOME"); !xdg.empty()) {
        file = fs::path(xdg) / "huggingface" / "token";
      } else if (const std::string user_home = getenv_string("HOME"); !user_home.empty()) {
        file = fs::path(user_home) / ".cache" / "huggingface" / "token";
      }
    }
    if (std::FILE* f = file.empty() ? nullptr : std::fopen(file.c_str(), "rb")) {
      char buf[512];
      token = trimmed(std::string(buf, std::fread(buf, 1, sizeof buf, f)));
      std::fclose(f);
    }
  }
  for (const char c : token) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) fail("HF_TOKEN holds a control character");
  }
  return token;
}

void write_text_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail("{}: cannot write: {}", shown(tmp), std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) fail("{}: cannot write: {}", shown(tmp), std::strerror(errno));
  fs::rename(tmp, path);
}

// snapshots/COMMIT/PATH -> ../../blobs/ETAG (one more ../ per directory in PATH), as the hub
// links it.
void link_into_snapshot(const fs::path& blob, const fs::path& pointer) {
  fs::create_directories(pointer.parent_path());
  std::error_code ec;
  fs::remove(pointer, ec);
  fs::create_symlink(blob.lexically_relative(pointer.parent_path()), pointer);
}

// The lock huggingface_hub takes on a blob while it downloads it (an flock on
// CACHE/.locks/models--ORG--NAME/ETAG.lock), so that two pulls, ours or the hub tools', never
// write one .incomplete file at once. Held until destroyed.
class BlobLock {
 public:
  BlobLock(const fs::path& lock, const ModelRef& ref, const std::string& file) {
    fs::create_directories(lock.parent_path());
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("{}: cannot create {}: {}", ref.text(), escape_control(lock.string()), std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      fail("{}: another download of {} is running (it holds {}); wait for it to finish", ref.text(),
           escape_control(file), escape_control(lock.string()));
    }
  }
  ~BlobLock() { ::close(fd_); }
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_ = -1;
};

// One file's download into blobs/ETAG.incomplete, resumed from what is there.
class BlobDownload {
 public:
  BlobDownload(const RepoFile& file, const fs::path& blob, const ModelRef& ref) : file_(file), blob_(blob), ref_(ref) {
    partial_ = blob.string() + ".incomplete";
    fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("{}: cannot create {}: {}", ref.text(), shown(partial_), std::strerror(errno));
    struct stat st {};
    ::fstat(fd_, &st);
    have_ = static_cast<uint64_t>(st.st_size);
    if (have_ > file.size) restart();
  }
  ~BlobDownload() {
    if (fd_ >= 0) ::close(fd_);
  }
  BlobDownload(const BlobDownload&) = delete;
  BlobDownload& operator=(const BlobDownload&) = delete;

  // Transfers the rest of the file; returns the bytes transferred.
  uint64_t fetch(hub::HttpClient& http, const std::string& url, bool sent_token, PullProgress progress,
                 const std::function<void(const PullProgress&)>& report) {
    uint64_t transferred = 0;
    for (int attempt = 0; attempt < 2 && have_ < file_.size; ++attempt) {
      const uint64_t from = have_;
      progress.resumed = from;
      const hub::BodySink sink = [&](long status, std::string_view bytes) {
        // A server that ignores the Range header sends the whole file again.
        if (status == 200 && have_ > 0 && transferred == 0 && have_ == from) {
          restart();
          progress.resumed = 0;
        }
        if (!write_all(bytes)) return false;
        transferred += bytes.size();
        progress.done = have_;
        if (report) report(progress);
        return true;
      };
      const hub::HttpResult r = http.download(url, from, sink);
      if (write_errno_ != 0) {
        fail("{}: cannot write {}: {} ({} of {} bytes kept; pull again to resume)", ref_.text(), shown(partial_),
             std::strerror(write_errno_), have_, file_.size);
      }
      if (r.transfer_error != 0) {
        fail("{}: the download of {} broke off after {} of {} bytes: {} (pull again to resume)", ref_.text(),
             shown(file_.path), have_, file_.size, escape_control(r.transfer_message));
      }
      if (r.status == 416) {  // the partial file does not fit what the server holds: start over once
        restart();
        continue;
      }
      if (r.status >= 400) hub::fail_http(r, ref_, fmt::format("the download of {}", shown(file_.path)), sent_token);
    }
    return transferred;
  }

  // Checks size and checksum, then renames the download to its blob name.
  void finish() {
    if (have_ != file_.size) {
      discard();
      fail("{}: {} arrived with {} bytes where the hub lists {}; the download was discarded", ref_.text(),
           shown(file_.path), have_, file_.size);
    }
    if (::fsync(fd_) != 0) fail("{}: cannot write {}: {}", ref_.text(), shown(partial_), std::strerror(errno));
    const hub::Digest kind = file_.lfs ? hub::Digest::Sha256 : hub::Digest::GitBlobSha1;
    const std::string got = hub::file_digest(partial_, kind);
    if (got != file_.etag) {
      discard();
      fail("{}: {} failed its checksum ({} {} where the hub lists {}); the download was discarded, pull again",
           ref_.text(), shown(file_.path), file_.lfs ? "sha256" : "git sha1", got, file_.etag);
    }
    fs::rename(partial_, blob_);
  }

 private:
  void restart() {
    if (::ftruncate(fd_, 0) != 0)
      fail("{}: cannot truncate {}: {}", ref_.text(), shown(partial_), std::strerror(errno));
    have_ = 0;
  }
  void discard() {
    std::error_code ec;
    fs::remove(partial_, ec);
  }
  bool write_all(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(have_));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        write_errno_ = n < 0 ? errno : EIO;
        return false;
      }
      have_ += static_cast<uint64_t>(n);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  const RepoFile& file_;
  fs::path blob_;
  fs::path partial_;
  const ModelRef& ref_;
  int fd_ = -1;
  uint64_t have_ = 0;
  int write_errno_ = 0;
};

bool blob_complete(const fs::path& blob, uint64_t size) {
  std::error_code ec;
  return fs::is_regular_file(blob, ec) && fs::file_size(blob, ec) == size;
}

PullResult from_cache_offline(const ModelRef& ref, const PullOptions& options) {
  const std::optional<fs::path> snapshot = cached_snapshot(options.cache, ref);
  if (!snapshot) {
    fail("{}: not in the Hugging Face cache {}, and HF_HUB_OFFLINE is set, so it cannot be downloaded", ref.text(),
         shown(options.cache));
  }
  PullResult result;
  result.commit = snapshot->filename().string();
  result.model_path = model_path_in_snapshot(*snapshot, ref);
  result.from_cache_offline = true;
  return result;
}

}  // namespace

PullOptions PullOptions::from_environment() {
  PullOptions o;
  o.cache = hub_cache_dir();
  o.endpoint = trimmed(getenv_string("HF_ENDPOINT"));
  if (o.endpoint.empty()) o.endpoint = "https://huggingface.co";
  while (o.endpoint.ends_with('/')) o.endpoint.pop_back();
  o.offline = hub_offline();
  if (!o.offline) o.token = token_from_environment();
  return o;
}

PullResult pull_model(const ModelRef& ref, const PullOptions& options) {
  if (options.offline) return from_cache_offline(ref, options);
  hub::HttpClient http(options.token);
  const bool sent_token = !options.token.empty();
  const hub::RepoListing listing = hub::fetch_listing(http, options.endpoint, ref, sent_token);
  const std::vector<RepoFile> files = hub::model_files(listing, ref);
  const fs::path repo = repo_cache_dir(options.cache, ref.repo);
  const fs::path snapshot = repo / "snapshots" / listing.commit;

  PullResult result;
  result.commit = listing.commit;
  std::vector<const RepoFile*> missing;
  for (const RepoFile& f : files) {
    result.files.push_back(f.path);
    result.bytes += f.size;
    if (!blob_complete(repo / "blobs" / f.etag, f.size)) missing.push_back(&f);
  }
  fs::create_directories(repo / "blobs");
  for (size_t i = 0; i < missing.size(); ++i) {
    const RepoFile& f = *missing[i];
    const fs::path blob = repo / "blobs" / f.etag;
    const BlobLock lock(options.cache / ".locks" / repo.filename() / (f.etag + ".lock"), ref, f.path);
    if (blob_complete(blob, f.size)) continue;  // another pull finished it meanwhile
    BlobDownload download(f, blob, ref);
    const std::string url = fmt::format("{}/{}/resolve/{}/{}", options.endpoint, hub::url_escape(ref.repo, true),
                                        listing.commit, hub::url_escape(f.path, true));
    PullProgress progress{f.path, i + 1, missing.size(), 0, f.size, 0};
    result.downloaded += download.fetch(http, url, sent_token, progress, options.progress);
    download.finish();
  }
  for (const RepoFile& f : files) link_into_snapshot(repo / "blobs" / f.etag, snapshot / f.path);
  if (ref.revision != listing.commit) write_text_file(repo / "refs" / ref.revision, listing.commit);
  result.model_path = model_path_in_snapshot(snapshot, ref);
  return result;
}

}  // namespace nanoinfer
