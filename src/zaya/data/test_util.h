#pragma once
// Helpers for the data layer's tests only (included by *_test.cc); the
// generic ones are in core/test_util.h.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "zaya/core/test_util.h"
#include "zaya/data/tokenizer.h"

namespace zaya::testing {

inline std::string kjv_path() { return std::string(ZAYA_SOURCE_DIR) + "/data/kjv/kjv.txt"; }

// The first documents of the KJV corpus, about `bytes` long, cut at a
// document boundary (a blank line).
inline std::string kjv_slice(size_t bytes) {
  std::string all = read_file(kjv_path());
  if (all.size() <= bytes) return all;
  size_t cut = all.rfind("\n\n", bytes);
  return all.substr(0, cut == std::string::npos ? bytes : cut + 1);
}

// A 400-piece BPE tokenizer trained once per test process on ~200 KB of KJV.
inline const std::string& small_tokenizer_path() {
  static TempDir dir;
  static std::string model = [] {
    std::string corpus = dir.file("kjv_slice.txt");
    write_file(corpus, kjv_slice(200'000));
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
