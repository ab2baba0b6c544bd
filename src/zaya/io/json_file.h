#pragma once
// A whole JSON document read from a file, with errors that name the file.

#include <nlohmann/json.hpp>
#include <string>

namespace zaya {

// Parses `path`; `what` describes the file for the error when it cannot be
// opened ("hardware profile", "--gemm-table"). Throws zaya::Error.
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace zaya
