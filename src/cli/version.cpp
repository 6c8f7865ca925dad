// What `nanoinfer --version` prints: the version and the commit the binary was built from
// (generated/build_commit.h, rewritten at every build by cmake/build_commit.cmake).
#include "version.h"

#include <fmt/format.h>

#include "build_commit.h"

namespace nanoinfer::cli {

std::string version_text() {
  const std::string_view commit = NANOINFER_BUILD_COMMIT;
  if (commit.empty())
    return fmt::format("nanoinfer {} (built outside a git checkout: commit unknown)", NANOINFER_VERSION);
  return fmt::format("nanoinfer {} (commit {}{})", NANOINFER_VERSION, commit,
                     NANOINFER_BUILD_DIRTY ? ", with uncommitted changes" : "");
}

}  // namespace nanoinfer::cli
