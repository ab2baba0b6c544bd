#include "zaya/serve/model_name.h"

#include <filesystem>

namespace zaya {

std::string default_model_name(const std::string& model_path) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(model_path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/"
  if (p.filename() == "final") {
    // A relative "final" (run from inside the run directory) still has a run to be named after.
    const fs::path run = fs::absolute(p).lexically_normal().parent_path();
    if (!run.filename().empty()) return run.filename().string();
  }
  return p.filename().string();
}

}  // namespace zaya
