#pragma once
// Small text helpers shared by the SVG writers: XML escaping, compact number
// formatting for coordinates, and a text-width estimate for layout.

#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

namespace zaya {

// Appends formatted text to `out` (with fmt's compile-time format checks).
template <typename... Args>
void append_format(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

// Escapes text for XML content or a double-quoted attribute value. Bytes that
// are not well-formed UTF-8, and characters XML 1.0 forbids (control
// characters other than tab/newline/CR, U+FFFE, U+FFFF), become U+FFFD, so any
// input yields a well-formed document.
std::string xml_escape(std::string_view text);

// A coordinate with at most two decimals and no trailing zeros ("12.5", "-3", "0").
std::string svg_number(double v);

// The font size of every figure's title, in pixels.
constexpr double kSvgTitleFontSize = 16;

// Approximate rendered width in pixels of `text` in a sans-serif font of
// `font_size` pixels (0.6 em per character); good enough to reserve margins.
double text_width(std::string_view text, double font_size);

// Starts a standalone SVG document: XML declaration, <svg> root of the given
// size (close it with "</svg>\n"), a <title> when `title` is not empty, and a
// white background.
void begin_svg(std::string& out, int width, int height, std::string_view title);

// A stable 32-bit hash (FNV-1a) used to make element ids unique per plot, so
// several SVGs inlined in one HTML page do not share clip-path ids.
uint32_t fnv1a(std::string_view text, uint32_t seed = 2166136261u);

// The x-axis title centred under the plot (at x_center, 10 px above the
// bottom of a height-H image) and the y-axis title rotated along the left
// edge (centred at y_center); empty titles are left out.
void append_axis_titles(std::string& svg, const std::string& x_label, const std::string& y_label, double x_center,
                        double y_center, double height);

}  // namespace zaya
