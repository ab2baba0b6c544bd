#include "zaya/bench/report_inputs.h"

#include <algorithm>
#include <filesystem>

#include "zaya/core/error.h"

namespace zaya {

std::vector<std::string> expand_report_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    if (!std::filesystem::is_directory(in)) {
      files.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(in)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".json" || ext == ".jsonl")) found.push_back(e.path().string());
    }
    std::sort(found.begin(), found.end());
    ZAYA_CHECK(!found.empty(), "{}: no .json or .jsonl files in this directory", in);
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

nlohmann::json report_summary_json(const std::string& out_dir, const std::vector<std::string>& written,
                                   const std::vector<ReportInput>& inputs) {
  nlohmann::json j = {{"verb", "report"}, {"out", out_dir}, {"files", written}};
  nlohmann::json in = nlohmann::json::array();
  for (const ReportInput& i : inputs) in.push_back({{"path", i.path}, {"kind", i.kind}});
  j["inputs"] = in;
  return j;
}

}  // namespace zaya
