#include "zaya/core/fault.h"

#include <cstdlib>
#include <sstream>

namespace zaya {

bool fault_planned(const std::string& kind, int rank, int64_t step) {
  const char* env = std::getenv("ZAYA_FAULT");
  if (env == nullptr) return false;
  std::stringstream all(env);
  std::string fault;
  while (std::getline(all, fault, ';')) {
    const size_t colon = fault.find(':');
    if (fault.substr(0, colon) != kind) continue;
    bool match = true;
    if (colon != std::string::npos) {
      std::stringstream fields(fault.substr(colon + 1));
      std::string field;
      while (std::getline(fields, field, ',')) {
        const size_t eq = field.find('=');
        if (eq == std::string::npos) continue;
        const std::string key = field.substr(0, eq);
        const int64_t value = std::atoll(field.c_str() + eq + 1);
        if (key == "rank" && value != rank) match = false;
        if (key == "step" && value != step) match = false;
      }
    }
    if (match) return true;
  }
  return false;
}

}  // namespace zaya
