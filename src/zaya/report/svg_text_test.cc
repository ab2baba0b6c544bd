#include "zaya/report/svg_text.h"

#include <gtest/gtest.h>

#include "zaya/io/utf8.h"

namespace zaya {
namespace {

TEST(SvgText, EscapesMarkup) {
  EXPECT_EQ(xml_escape(R"(a<b & "c" > 'd')"), "a&lt;b &amp; &quot;c&quot; &gt; &apos;d&apos;");
  EXPECT_EQ(xml_escape("plain"), "plain");
  EXPECT_EQ(xml_escape("tab\tnewline\n"), "tab\tnewline\n");
}

TEST(SvgText, KeepsUtf8AndReplacesWhatXmlForbids) {
  EXPECT_EQ(xml_escape("λ = 3·10⁻⁴ 🚀"), "λ = 3·10⁻⁴ 🚀");
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(xml_escape(std::string("a\0b", 3)), "a" + fffd + "b");
  EXPECT_EQ(xml_escape("\x1b[31m"), fffd + "[31m");
  EXPECT_EQ(xml_escape("\xff"), fffd);                        // not UTF-8
  EXPECT_EQ(xml_escape("\xc3"), fffd);                        // cut-off sequence
  EXPECT_EQ(xml_escape("\xc0\xaf"), fffd + fffd);             // overlong '/'
  EXPECT_EQ(xml_escape("\xed\xa0\x80"), fffd + fffd + fffd);  // UTF-16 surrogate
  EXPECT_EQ(xml_escape("\xef\xbf\xbf"), fffd);                // U+FFFF
}

TEST(SvgText, Utf8SequenceLengths) {
  EXPECT_EQ(utf8_sequence_length("a", 0), 1u);
  EXPECT_EQ(utf8_sequence_length("\xc3\xa9", 0), 2u);
  EXPECT_EQ(utf8_sequence_length("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(utf8_sequence_length("\xf0\x9f\x9a\x80", 0), 4u);
  EXPECT_EQ(utf8_sequence_length("\xf4\x90\x80\x80", 0), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8_sequence_length("\xe0\x80\x80", 0), 0u);      // overlong
  EXPECT_EQ(utf8_sequence_length("\x80", 0), 0u);
}

TEST(SvgText, NumbersAreCompact) {
  EXPECT_EQ(svg_number(12.5), "12.5");
  EXPECT_EQ(svg_number(3.0), "3");
  EXPECT_EQ(svg_number(-0.001), "0");
  EXPECT_EQ(svg_number(1.006), "1.01");
  EXPECT_EQ(svg_number(NAN), "0");
}

}  // namespace
}  // namespace zaya
