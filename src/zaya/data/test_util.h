#pragma once
// Helpers for the data layer's tests only (included by *_test.cc).

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "zaya/data/tokenizer.h"

namespace zaya::testing {

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "zaya_data_test_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string kjv_path() { return std::string(ZAYA_SOURCE_DIR) + "/data/kjv/kjv.txt"; }

// The first documents of the KJV corpus, about `bytes` long, cut at a
// document boundary (a blank line).
inline std::string kjv_slice(size_t bytes) {
  std::string all = read_bytes(kjv_path());
  if (all.size() <= bytes) return all;
  size_t cut = all.rfind("\n\n", bytes);
  return all.substr(0, cut == std::string::npos ? bytes : cut + 1);
}

// A 400-piece BPE tokenizer trained once per test process on ~200 KB of KJV.
inline const std::string& small_tokenizer_path() {
  static TempDir dir;
  static std::string model = [] {
    std::string corpus = dir.file("kjv_slice.txt");
    write_bytes(corpus, kjv_slice(200'000));
    TokenizerTrainOptions o;
    o.corpus_path = corpus;
    o.output_prefix = dir.file("tok");
    o.vocab_size = 400;
    Tokenizer::train(o);
    return o.output_prefix + ".model";
  }();
  return model;
}

}  // namespace zaya::testing
