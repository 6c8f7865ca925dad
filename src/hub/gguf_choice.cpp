#include "hub/gguf_choice.h"

#include <fmt/format.h>
#include <algorithm>
#include <cctype>

#include "hub/hub_names.h"
#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer::hub {

namespace {

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Whether `quant` occurs in `name` as a whole part: preceded by the start or a separator, and
// followed by the end or a separator other than '_' (which would continue the type's name).
bool names_quant(std::string_view name, std::string_view quant) {
  const std::string n = upper(name);
  const std::string q = upper(quant);
  for (size_t at = n.find(q); at != std::string::npos; at = n.find(q, at + 1)) {
    const bool starts = at == 0 || std::string_view("-._/").find(n[at - 1]) != std::string_view::npos;
    const size_t end = at + q.size();
    const bool ends = end == n.size() || std::string_view("-./").find(n[end]) != std::string_view::npos;
    if (starts && ends) return true;
  }
  return false;
}

std::string choices(const std::vector<std::string>& ggufs) {
  std::string text;
  for (const std::string& p : ggufs)
    text += fmt::format("{}:{} ({})", text.empty() ? "" : ", ", escape_control(gguf_quant_label(p)), escape_control(p));
  return text;
}

}  // namespace

bool is_gguf_name(std::string_view path) {
  return path.size() > 5 && upper(path.substr(path.size() - 5)) == ".GGUF";
}

std::string gguf_quant_label(std::string_view path) {
  std::string_view base = path.substr(path.find_last_of('/') + 1);
  if (is_gguf_name(base)) base.remove_suffix(5);
  const size_t cut = base.find_last_of("-.");
  return upper(cut == std::string_view::npos ? base : base.substr(cut + 1));
}

std::string choose_gguf(const std::vector<std::string>& paths, std::string_view quant, std::string_view repo) {
  std::vector<std::string> ggufs;
  std::copy_if(paths.begin(), paths.end(), std::back_inserter(ggufs),
               [](const std::string& p) { return is_gguf_name(p); });
  std::sort(ggufs.begin(), ggufs.end());
  if (ggufs.empty()) fail("{}: has no GGUF file", escape_control(repo));
  std::vector<std::string> matches;
  std::copy_if(ggufs.begin(), ggufs.end(), std::back_inserter(matches),
               [&](const std::string& p) { return quant.empty() || names_quant(p, quant); });
  if (matches.empty()) {
    fail("{}: no GGUF file is quantized as {} (choose one of: {})", escape_control(repo), escape_control(quant),
         choices(ggufs));
  }
  if (std::all_of(matches.begin(), matches.end(), [](const std::string& p) { return is_split_gguf_part(p); })) {
    fail("{}: {} is a GGUF file split in parts; nanoinfer loads GGUF models of one file", escape_control(repo),
         escape_control(matches.front()));
  }
  if (matches.size() > 1) {
    fail("{}: {} GGUF files{}; name one with :QUANT: {}", escape_control(repo), matches.size(),
         quant.empty() ? "" : fmt::format(" match {}", escape_control(quant)), choices(matches));
  }
  return matches.front();
}

}  // namespace nanoinfer::hub
