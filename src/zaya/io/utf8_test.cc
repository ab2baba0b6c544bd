// The cut-off character at the end of streamed text.
#include "zaya/io/utf8.h"

#include <gtest/gtest.h>

namespace zaya {
namespace {

TEST(Utf8, IncompleteTailCountsTheBytesOfACutOffCharacter) {
  EXPECT_EQ(incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("caf\xc3\xa9"), 0u);        // é complete
  EXPECT_EQ(incomplete_utf8_tail("caf\xc3"), 1u);            // é's lead byte only
  EXPECT_EQ(incomplete_utf8_tail("x\xe2\x98"), 2u);          // ☃ (3 bytes) cut after 2
  EXPECT_EQ(incomplete_utf8_tail("x\xe2"), 1u);              // ... after 1
  EXPECT_EQ(incomplete_utf8_tail("x\xe2\x98\x83"), 0u);      // complete
  EXPECT_EQ(incomplete_utf8_tail("\xf0\x9f\x9a"), 3u);       // 🚀 (4 bytes) cut after 3
  EXPECT_EQ(incomplete_utf8_tail("\xf0\x9f\x9a\x80"), 0u);   // complete
  EXPECT_EQ(incomplete_utf8_tail("a\xc3\xa9\xe2\x98"), 2u);  // only the last character counts
}

}  // namespace
}  // namespace zaya
