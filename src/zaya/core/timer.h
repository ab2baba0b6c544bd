#pragma once
#include <chrono>

namespace zaya {

// Seconds since an arbitrary fixed point (steady clock).
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace zaya
