// `nanoinfer --version`: "nanoinfer 0.1.0 (commit 353a31e)".
#pragma once

#include <string>

namespace nanoinfer::cli {

std::string version_text();

}  // namespace nanoinfer::cli
