#include "hub/file_digest.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "nanoinfer/error.h"

namespace nanoinfer::hub {

std::string file_digest(const std::filesystem::path& path, Digest digest) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot read: {}", path.string(), std::strerror(errno));
  const std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
  const std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), digest == Digest::Sha256 ? EVP_sha256() : EVP_sha1(), nullptr) != 1)
    fail("OpenSSL cannot compute a digest");
  if (digest == Digest::GitBlobSha1) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail("{}: cannot stat: {}", path.string(), std::strerror(errno));
    const std::string header = fmt::format("blob {}", st.st_size);
    EVP_DigestUpdate(ctx.get(), header.data(), header.size() + 1);  // with its terminating NUL
  }
  std::vector<unsigned char> buf(size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("{}: cannot read: {}", path.string(), std::strerror(errno));
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n));
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), out, &len);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", out[i]);
  return hex;
}

}  // namespace nanoinfer::hub
