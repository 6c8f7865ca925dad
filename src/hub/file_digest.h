// The two checksums the hub publishes for a file: the sha256 of an LFS file's bytes (its
// lfs.sha256, also its ETag) and the git blob sha1 of a small file (sha1 over "blob <size>\0"
// and the bytes: its blobId). Computed with OpenSSL.
#pragma once

#include <filesystem>
#include <string>

namespace nanoinfer::hub {

enum class Digest { Sha256, GitBlobSha1 };

// The lower-case hex digest of the file's bytes; an Error naming the file when it cannot be read.
std::string file_digest(const std::filesystem::path& path, Digest digest);

}  // namespace nanoinfer::hub
