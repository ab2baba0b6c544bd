#include "zaya/io/json_file.h"

#include <fstream>

#include "zaya/core/error.h"

namespace zaya {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot read {} '{}'", what, path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
}

}  // namespace zaya
