// The layering of docs/ARCHITECTURE.md, checked against the code: every `#include "..."`
// under src/, kernels/ and include/ must name a header of its own layer or of a layer the
// document's table allows. The table is parsed from the document itself, so the picture in
// the docs and the include graph cannot drift apart.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = NANOINFER_SOURCE_DIR;

struct Layer {
  std::string directory;
  std::set<std::string> public_headers;  // file names in include/nanoinfer/
  std::set<std::string> may_include;     // layer names, or "public"
  size_t row = 0;                        // its place in the table, from 0 at the top
};

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::map<std::string, Layer> read_layer_table() {
  std::ifstream doc(kRoot / "docs/ARCHITECTURE.md");
  std::map<std::string, Layer> layers;
  bool inside = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.find("<!-- layers:begin -->") != std::string::npos) inside = true;
    if (line.find("<!-- layers:end -->") != std::string::npos) break;
    if (!inside || line.rfind("| ", 0) != 0 || line.find("---") != std::string::npos) continue;
    std::vector<std::string> cells;
    std::string cell;
    for (char c : line.substr(1)) {
      if (c == '|') {
        cells.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    if (cells.size() != 4 || words(cells[0]).size() != 1 || words(cells[0])[0] == "layer") continue;
    const size_t row = layers.size();
    Layer& l = layers[words(cells[0])[0]];
    l.row = row;
    l.directory = words(cells[1]).at(0);
    for (const auto& h : words(cells[2])) l.public_headers.insert(h);
    for (const auto& m : words(cells[3])) l.may_include.insert(m);
  }
  return layers;
}

TEST(Layers, EveryIncludeIsAllowedByTheArchitectureTable) {
  const std::map<std::string, Layer> layers = read_layer_table();
  ASSERT_GE(layers.size(), 8u) << "the layer table in docs/ARCHITECTURE.md was not found";

  std::map<std::string, std::string> layer_of_dir, layer_of_public;
  for (const auto& [name, l] : layers) {
    layer_of_dir[l.directory] = name;
    for (const auto& h : l.public_headers) layer_of_public[h] = name;
  }
  // Every public header is owned by exactly one layer.
  for (const auto& entry : fs::directory_iterator(kRoot / "include/nanoinfer")) {
    EXPECT_TRUE(layer_of_public.count(entry.path().filename().string()))
        << "include/nanoinfer/" << entry.path().filename().string() << " is in no layer of the table";
  }

  // The layer a quoted include names: "nanoinfer/x.h" is x.h's owner; "dir/x.h" is dir's layer
  // (src/dir or a top-level dir); a bare "x.h" is the including file's own directory.
  auto target_layer = [&](const std::string& inc, const std::string& own) -> std::string {
    const auto slash = inc.find('/');
    if (slash == std::string::npos) return own;
    const std::string head = inc.substr(0, slash);
    if (head == "nanoinfer") {
      const auto it = layer_of_public.find(inc.substr(slash + 1));
      return it == layer_of_public.end() ? "?" : it->second;
    }
    for (const std::string& dir : {"src/" + head, head}) {
      if (const auto it = layer_of_dir.find(dir); it != layer_of_dir.end()) return it->second;
    }
    return "?";
  };

  // The quoted name of an `#include "..."` line, or "" (a hand-rolled match: std::regex trips a
  // false GCC 12 -Wmaybe-uninitialized under the asan preset).
  auto quoted_include = [](const std::string& line) -> std::string {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') return "";
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) return "";
    const size_t open = line.find_first_not_of(" \t", i + 7);
    if (open == std::string::npos || line[open] != '"') return "";
    const size_t close = line.find('"', open + 1);
    return close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
  };
  size_t checked = 0;
  auto check_file = [&](const fs::path& file, const std::string& own) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      const std::string inc = quoted_include(line);
      if (inc.empty()) continue;
      if (inc.find("generated") != std::string::npos || inc.rfind("viz_page_assets", 0) == 0) continue;  // build output
      const std::string target = target_layer(inc, own);
      const Layer& l = layers.at(own);
      const bool is_public = inc.rfind("nanoinfer/", 0) == 0;
      const bool allowed = target == own || l.may_include.count(target) || (is_public && l.may_include.count("public"));
      EXPECT_TRUE(allowed) << fs::relative(file, kRoot).string() << " (layer " << own << ") includes \"" << inc
                           << "\" (layer " << target << "), which docs/ARCHITECTURE.md does not allow";
      ++checked;
    }
  };
  for (const auto& [name, l] : layers) {
    for (const auto& entry : fs::directory_iterator(kRoot / l.directory)) {
      const auto ext = entry.path().extension();
      if (ext == ".cpp" || ext == ".h") check_file(entry.path(), name);
    }
  }
  for (const auto& entry : fs::directory_iterator(kRoot / "include/nanoinfer")) {
    check_file(entry.path(), layer_of_public.count(entry.path().filename().string())
                                 ? layer_of_public.at(entry.path().filename().string())
                                 : "base");
  }
  EXPECT_GT(checked, 150u);
}

// The table's own order: a layer may include only layers listed before it (and `public` only
// after every layer that owns a public header), so with the check above no include runs from a
// lower layer up to a higher one.
TEST(Layers, EachLayerIncludesOnlyLayersListedBeforeIt) {
  const std::map<std::string, Layer> layers = read_layer_table();
  ASSERT_GE(layers.size(), 8u) << "the layer table in docs/ARCHITECTURE.md was not found";
  for (const auto& [name, l] : layers) {
    for (const auto& m : l.may_include) {
      if (m == "public") {
        for (const auto& [owner, o] : layers) {
          EXPECT_TRUE(o.public_headers.empty() || o.row < l.row)
              << name << " may include every public header, but " << owner
              << " (which owns some) is not listed before it";
        }
        continue;
      }
      ASSERT_TRUE(layers.count(m)) << name << " may include " << m << ", which is no layer of the table";
      EXPECT_LT(layers.at(m).row, l.row) << name << " may include " << m << ", which is listed after it";
    }
  }
}

// The other half of the picture: no source file grows past what one sitting can read.
TEST(Layers, NoSourceFileIsOverSixHundredLines) {
  for (const char* dir : {"src", "kernels", "include", "tests", "bench", "fuzz"}) {
    for (const auto& entry : fs::recursive_directory_iterator(kRoot / dir)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".h") continue;
      std::ifstream in(entry.path());
      size_t lines = 0;
      for (std::string line; std::getline(in, line);) ++lines;
      EXPECT_LE(lines, 650u) << fs::relative(entry.path(), kRoot).string();
    }
  }
}

}  // namespace
}  // namespace nanoinfer
