#include "zaya/core/fault.h"

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <vector>

#include "zaya/core/error.h"

namespace zaya {
namespace {

const char* kKinds[] = {"kill",    "hang", "nan",     "spike",      "slow",
                        "preempt", "step", "startup", "ckpt-write", "corrupt-ckpt"};

std::vector<FaultSpec> parse(const std::string& spec) {
  std::vector<FaultSpec> out;
  std::stringstream all(spec);
  std::string item;
  while (std::getline(all, item, ';')) {
    if (item.empty()) continue;
    FaultSpec f;
    const size_t colon = item.find(':');
    f.kind = item.substr(0, colon);
    bool known = false;
    for (const char* k : kKinds) known |= f.kind == k;
    ZAYA_CHECK(known,
               "fault '{}' has an unknown kind '{}'; allowed: kill, hang, nan, spike, slow, preempt, step, "
               "startup, ckpt-write, corrupt-ckpt",
               item, f.kind);
    if (colon != std::string::npos) {
      std::stringstream fields(item.substr(colon + 1));
      std::string field;
      while (std::getline(fields, field, ',')) {
        const size_t eq = field.find('=');
        ZAYA_CHECK(eq != std::string::npos, "fault '{}': field '{}' is not key=value", item, field);
        const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        ZAYA_CHECK(end != value.c_str() && *end == '\0', "fault '{}': {} = '{}' is not a number", item, key, value);
        if (key == "rank")
          f.rank = int(v);
        else if (key == "step")
          f.step = int64_t(v);
        else if (key == "ms")
          f.ms = v;
        else
          fail("fault '{}': unknown field '{}'; allowed: rank, step, ms", item, key);
      }
    }
    out.push_back(f);
  }
  return out;
}

std::mutex g_mutex;
bool g_set = false;
std::vector<FaultSpec> g_plan;

const std::vector<FaultSpec>& plan() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_set) {
    const char* env = std::getenv("ZAYA_FAULT");
    g_plan = env != nullptr ? parse(env) : std::vector<FaultSpec>{};
    g_set = true;
  }
  return g_plan;
}

}  // namespace

void set_fault_plan(const std::string& spec) {
  std::vector<FaultSpec> parsed = parse(spec);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_plan = std::move(parsed);
  g_set = true;
}

std::optional<FaultSpec> planned_fault(const std::string& kind, int rank, int64_t step) {
  plan();  // load ZAYA_FAULT on first use
  std::lock_guard<std::mutex> lock(g_mutex);
  for (FaultSpec& f : g_plan)
    if (f.kind == kind && !f.fired && (f.rank < 0 || f.rank == rank) && (f.step < 0 || f.step == step)) {
      if (kind != "slow") f.fired = true;  // one shot: a rolled-back or resumed step does not fail again
      return f;
    }
  return std::nullopt;
}

}  // namespace zaya
