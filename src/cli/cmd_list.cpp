// `nanoinfer list` and `nanoinfer rm ORG/NAME`: the models in the Hugging Face hub cache
// (nanoinfer/hub_cache.h), whichever tool downloaded them.
#include <fmt/format.h>

#include <memory>

#include "byte_size.h"
#include "command.h"
#include "nanoinfer/error.h"
#include "nanoinfer/hub_cache.h"
#include "nanoinfer/json_limits.h"
#include "output.h"

namespace nanoinfer::cli {
namespace {

void list_models() {
  const std::filesystem::path cache = hub_cache_dir();
  const std::vector<CachedModel> models = list_cached_models(cache);
  if (models.empty()) {
    print_out("no models in the Hugging Face cache {} (get one with `nanoinfer pull ORG/NAME`)\n",
              escape_control(cache.string()));
    return;
  }
  size_t width = 5;
  // Names come from the cache's directory and file names: shown with control characters escaped.
  for (const CachedModel& m : models) width = std::max(width, escape_control(m.repo).size());
  print_out("{:<{}}  {:>10}  {}\n", "MODEL", width, "SIZE", "REVISIONS");
  for (const CachedModel& m : models) {
    std::string revisions;
    for (const auto& [name, commit] : m.refs) revisions += fmt::format("{}={} ", name, commit.substr(0, 12));
    if (m.refs.empty()) {
      for (const std::string& s : m.snapshots) revisions += fmt::format("@{} ", s.substr(0, 12));
    }
    for (const std::string& g : m.gguf_quants) revisions += fmt::format(":{} ", escape_control(g));
    if (!revisions.empty()) revisions.pop_back();
    print_out("{:<{}}  {:>10}  {}\n", escape_control(m.repo), width, byte_size(m.bytes), escape_control(revisions));
  }
  print_out("cache: {}\n", escape_control(cache.string()));
}

void remove_model(const std::string& text) {
  const ModelRef ref = model_ref_or_fail(text);
  if (ref.revision_given || !ref.quant.empty())
    fail("rm removes a whole model: give ORG/NAME without @REVISION or :QUANT (got {})", text);
  const std::filesystem::path cache = hub_cache_dir();
  const uint64_t bytes = remove_cached_model(cache, ref.repo);
  print_out("removed {} ({}) from {}\n", ref.repo, byte_size(bytes), escape_control(cache.string()));
}

const bool registered_list = register_command({
    "",
    "list",
    "List the models in the Hugging Face hub cache, with their sizes",
    [](CLI::App& sub) {
      sub.footer(
          "The cache is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub: models pulled by "
          "`nanoinfer pull` or by huggingface-cli. REVISIONS shows each branch or tag with its commit, and the "
          ":QUANT of each GGUF file a model holds (-m ORG/NAME:QUANT).");
      sub.callback([] { list_models(); });
    },
});

const bool registered_rm = register_command({
    "",
    "rm",
    "Delete a model from the Hugging Face hub cache (ORG/NAME)",
    [](CLI::App& sub) {
      auto model = std::make_shared<std::string>();
      sub.add_option("model", *model, "ORG/NAME of a model in the cache (see `nanoinfer list`)")->required();
      sub.footer("The cache is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.");
      sub.callback([model] { remove_model(*model); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
