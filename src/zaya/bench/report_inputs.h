#pragma once
// What `zaya report` reads and what it tells about its work: the input list
// with directories expanded, and the summary document of its --json.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/bench/report_builder.h"

namespace zaya {

// Files stay as given; a directory stands for the .json and .jsonl regular
// files directly inside it, in name order (an error when it holds none).
std::vector<std::string> expand_report_inputs(const std::vector<std::string>& inputs);

// {"verb": "report", "out": DIR, "files": [written...], "inputs": [{"path", "kind"}...]}
nlohmann::json report_summary_json(const std::string& out_dir, const std::vector<std::string>& written,
                                   const std::vector<ReportInput>& inputs);

}  // namespace zaya
