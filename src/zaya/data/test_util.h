#pragma once
// Helpers for the data layer's tests only (included by *_test.cc); the
// generic ones are in core/test_util.h.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "zaya/core/error.h"
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
    o.corpus.inputs = {corpus};
    o.output_prefix = dir.file("tok");
    o.vocab_size = 400;
    Tokenizer::train(o);
    return o.output_prefix + ".model";
  }();
  return model;
}

// Expects `fn` to throw zaya::Error whose message contains every part.
template <typename Fn>
void expect_data_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected zaya::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// `text` as one gzip member (zlib).
inline std::string gzip_bytes(std::string_view text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// `text` as one zstd frame.
inline std::string zstd_bytes(std::string_view text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

}  // namespace zaya::testing
