#pragma once
// A tiny wall-clock profiler for the step loop: named regions accumulate their
// time and call count. Off unless ZAYA_PROFILE=1 is set (then a region costs
// two clock reads); `zaya bench train` prints the table.
//
//   { ProfileScope scope("moe.forward"); ... }

#include <string>
#include <vector>

namespace zaya {

struct ProfileEntry {
  std::string name;
  double seconds = 0;
  long calls = 0;
};

bool profiling_enabled();
// Index of a named region (registered once; call sites cache it in a static).
int profile_region(const char* name);
void profile_add(int region, double seconds);
std::vector<ProfileEntry> profile_snapshot();
void profile_reset();

class ProfileScope {
 public:
  explicit ProfileScope(int region);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  int region_;
  double start_ = 0;
};

}  // namespace zaya

// ZAYA_PROFILE_SCOPE("name"): time the rest of the enclosing block.
#define ZAYA_PROFILE_CONCAT2(a, b) a##b
#define ZAYA_PROFILE_CONCAT(a, b) ZAYA_PROFILE_CONCAT2(a, b)
#define ZAYA_PROFILE_SCOPE(name)                                                               \
  static const int ZAYA_PROFILE_CONCAT(zaya_region_, __LINE__) = ::zaya::profile_region(name); \
  ::zaya::ProfileScope ZAYA_PROFILE_CONCAT(zaya_scope_, __LINE__)(ZAYA_PROFILE_CONCAT(zaya_region_, __LINE__))
