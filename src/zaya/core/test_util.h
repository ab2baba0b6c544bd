#pragma once
// Helpers for tests (included by *_test.cc only): a scratch directory,
// whole-file reads and writes, checks on zaya::Error messages, and for the
// vectorised float kernels the distance in ulp between two floats, spread
// inputs and the check that a vector loop gives each value's lone bits.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/core/error.h"

namespace zaya::testing {

// Distance in units in the last place between two finite floats of the same sign.
inline int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(int64_t(ia) - int64_t(ib));
}

// n floats spread over about [-scale 2^31, scale 2^31] by a fixed linear
// congruential sequence from `seed`: inputs for sweeps.
inline std::vector<float> spread_floats(size_t n, uint32_t seed, float scale) {
  std::vector<float> x(n);
  for (float& v : x) {
    seed = seed * 1664525u + 1013904223u;
    v = float(int32_t(seed)) * scale;
  }
  return x;
}

// Expects f over x in an `omp simd` loop to give, element by element, the
// bits of f of that element alone outside any vector loop (NaN and NaN
// match): a vectorised kernel's result must not depend on where a value
// sits in an array, so not on the thread count either.
template <typename F>
void expect_same_bits_in_vector_loop_as_alone(const std::vector<float>& x, F f) {
  std::vector<float> y(x.size());
#pragma omp simd
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    volatile float xi = x[i];  // one element at a time, outside any vector loop
    const float alone = f(xi);
    if (std::isnan(alone)) {
      EXPECT_TRUE(std::isnan(y[i])) << i;
    } else {
      EXPECT_EQ(y[i], alone) << "i = " << i << ", x = " << x[i];
    }
  }
}

// A fresh directory under $TMPDIR, removed with everything in it when the
// object goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "zaya_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) fail("cannot create a temporary directory from {}", pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return (std::filesystem::path(path_) / name).string(); }

  // Writes `bytes` to `name` inside the directory and returns the full path.
  std::string write(std::string_view name, std::string_view bytes) const {
    std::string p = file(name);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) fail("{}: cannot write test file", p);
    return p;
  }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("{}: cannot write test file", path);
}

// C++ heap allocations made by the test process so far outside library calls
// (operator new is replaced in tests/test_main.cc to count them).
long allocation_count();

// The message of the zaya::Error that f throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Expects f to throw a zaya::Error whose message contains `part`.
inline void expect_error(const std::function<void()>& f, const std::string& part) {
  std::string message = error_of(f);
  EXPECT_NE(message.find(part), std::string::npos) << message;
}

}  // namespace zaya::testing
