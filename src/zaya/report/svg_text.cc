#include "zaya/report/svg_text.h"

#include <fmt/format.h>

#include <cmath>

#include "zaya/io/utf8.h"

namespace zaya {

std::string xml_escape(std::string_view text) {
  constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t len = utf8_sequence_length(text, i);
    if (len == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    std::string_view seq = text.substr(i, len);
    i += len;
    if (len == 1) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        case '\t':
        case '\n':
        case '\r': out += static_cast<char>(c); break;
        default: out += (c < 0x20 || c == 0x7f) ? kReplacement : seq;
      }
    } else if (seq == "\xef\xbf\xbe" || seq == "\xef\xbf\xbf") {  // U+FFFE, U+FFFF
      out += kReplacement;
    } else {
      out += seq;
    }
  }
  return out;
}

std::string svg_number(double v) {
  if (!std::isfinite(v)) return "0";
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

double text_width(std::string_view text, double font_size) {
  size_t chars = 0;
  for (char c : text)
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++chars;  // count code points, not bytes
  return 0.6 * font_size * static_cast<double>(chars);
}

void begin_svg(std::string& out, int width, int height, std::string_view title) {
  append_format(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  append_format(out,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n",
                width, height);
  if (!title.empty()) append_format(out, "<title>{}</title>\n", xml_escape(title));
  append_format(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
}

uint32_t fnv1a(std::string_view text, uint32_t seed) {
  uint32_t h = seed;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

void append_axis_titles(std::string& svg, const std::string& x_label, const std::string& y_label, double x_center,
                        double y_center, double height) {
  if (!x_label.empty())
    append_format(svg, "<text class=\"xlabel\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                  svg_number(x_center), svg_number(height - 10), xml_escape(x_label));
  if (!y_label.empty())
    append_format(
        svg, "<text class=\"ylabel\" transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        svg_number(y_center), xml_escape(y_label));
}

}  // namespace zaya
