#include "hub/hub_names.h"

#include <algorithm>
#include <cctype>

namespace nanoinfer::hub {

namespace {

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
}

// "D+-of-D+" exactly.
bool is_part_count(std::string_view s) {
  const size_t of = s.find("-of-");
  return of != std::string_view::npos && is_digits(s.substr(0, of)) && is_digits(s.substr(of + 4));
}

}  // namespace

bool is_name_part(std::string_view s) {
  return !s.empty() && s.size() <= 96 && std::isalnum(static_cast<unsigned char>(s.front())) != 0 &&
         std::all_of(s.begin(), s.end(), is_name_char) && s.find("..") == std::string_view::npos;
}

bool is_revision(std::string_view s) {
  if (s.empty() || s.size() > 256 || s.find("..") != std::string_view::npos) return false;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(s.find('/', start), s.size());
    const std::string_view part = s.substr(start, end - start);
    if (part.empty() || !std::all_of(part.begin(), part.end(), is_name_char)) return false;
    if (end == s.size()) return true;
    start = end + 1;
  }
}

bool is_commit_hash(std::string_view s) {
  return s.size() == 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_split_gguf_part(std::string_view path) {
  constexpr std::string_view kSuffix = "-00001-of-00003.gguf";  // the shape; digits vary
  if (path.size() < kSuffix.size()) return false;
  std::string tail(path.substr(path.size() - kSuffix.size()));
  for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view t = tail;
  return t.front() == '-' && t.ends_with(".gguf") && t.substr(6, 4) == "-of-" && is_digits(t.substr(1, 5)) &&
         is_digits(t.substr(10, 5));
}

bool is_safetensors_shard(std::string_view path) {
  constexpr std::string_view kPrefix = "model-", kSuffix = ".safetensors";
  if (!path.starts_with(kPrefix) || !path.ends_with(kSuffix) || path.size() < kPrefix.size() + kSuffix.size())
    return false;
  return is_part_count(path.substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size()));
}

}  // namespace nanoinfer::hub
