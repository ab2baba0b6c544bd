#pragma once
// Shared pieces of the fuzz targets: a per-process scratch directory (for the
// readers that open files by path), and the fixed safetensors shards that the
// directory target's fuzzed index refers to (also used by make_seeds).

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/io/safetensors_writer.h"

namespace zaya::fuzz {

// A directory private to this process, removed at exit. Under /dev/shm when
// it is writable, so the per-input file writes stay in memory.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    std::string pattern = (base / "zaya_fuzz_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("zaya fuzz: mkdtemp");
      std::abort();
    }
    static std::string remove_at_exit;
    remove_at_exit = pattern;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(remove_at_exit, ignored);
    });
    return pattern;
  }();
  return dir;
}

inline void write_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::fprintf(stderr, "zaya fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// Two shards: a.safetensors holds x [2, 3] F32 and y [4] BF16, b.safetensors holds z [2] I32.
inline void write_fixture_shards(const std::string& dir) {
  static const float x[6] = {1, 2, 3, 4, 5, 6};
  static const float y[4] = {0.5f, -1, 2, 8};
  static const int32_t z[2] = {7, -7};
  SafetensorsWriter a;
  a.add_f32("x", {2, 3}, x);
  a.add_bf16("y", {4}, y);
  a.write(dir + "/a.safetensors");
  SafetensorsWriter b;
  b.set_metadata("format", "pt");
  b.add_i32("z", {2}, z);
  b.write(dir + "/b.safetensors");
}

// A valid index for the fixture shards.
inline constexpr std::string_view kFixtureIndex =
    R"({"metadata": {"total_size": 40}, "weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}})";

}  // namespace zaya::fuzz
