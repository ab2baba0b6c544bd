#include "zaya/core/profiler.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "zaya/core/timer.h"

namespace zaya {
namespace {

std::mutex g_profiler_mutex;
std::vector<ProfileEntry>& entries() {
  static std::vector<ProfileEntry> e;
  return e;
}

}  // namespace

bool profiling_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("ZAYA_PROFILE");
    return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
  }();
  return enabled;
}

int profile_region(const char* name) {
  std::lock_guard<std::mutex> lock(g_profiler_mutex);
  auto& e = entries();
  for (size_t i = 0; i < e.size(); ++i)
    if (e[i].name == name) return int(i);
  e.push_back({name, 0.0, 0});
  return int(e.size() - 1);
}

void profile_add(int region, double seconds) {
  std::lock_guard<std::mutex> lock(g_profiler_mutex);
  entries()[region].seconds += seconds;
  entries()[region].calls += 1;
}

std::vector<ProfileEntry> profile_snapshot() {
  std::lock_guard<std::mutex> lock(g_profiler_mutex);
  return entries();
}

void profile_reset() {
  std::lock_guard<std::mutex> lock(g_profiler_mutex);
  for (auto& e : entries()) {
    e.seconds = 0;
    e.calls = 0;
  }
}

ProfileScope::ProfileScope(int region) : region_(region) {
  if (profiling_enabled()) start_ = now_seconds();
}

ProfileScope::~ProfileScope() {
  if (profiling_enabled()) profile_add(region_, now_seconds() - start_);
}

}  // namespace zaya
