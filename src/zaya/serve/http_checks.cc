#include "zaya/serve/http_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <functional>

namespace zaya {
namespace {

std::string lower_trimmed(std::string s) {
  const auto space = [](unsigned char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && space(s.back())) s.pop_back();
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), [&](unsigned char c) { return !space(c); }));
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> header_values(const httplib::Request& req, const char* name) {
  std::vector<std::string> out;
  const auto range = req.headers.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) out.push_back(lower_trimmed(it->second));
  return out;
}

// Methods this server answers somewhere; anything else gets 501.
bool served_method(const std::string& m) { return m == "GET" || m == "HEAD" || m == "POST" || m == "OPTIONS"; }

// The tokens httplib's request-line parser knows (others fail the parse, a 400 we turn into 501).
bool httplib_method(const std::string& m) {
  static const char* known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"};
  return std::any_of(std::begin(known), std::end(known), [&](const char* k) { return m == k; });
}

std::string route_list(const std::vector<HttpRoute>& routes) {
  std::string out;
  for (const HttpRoute& r : routes) out += (out.empty() ? "" : ", ") + r.method + " " + r.path;
  return out;
}

}  // namespace

HttpRefusal check_body_framing(const httplib::Request& req, int64_t max_body_bytes) {
  const std::vector<std::string> lengths = header_values(req, "Content-Length");
  const std::vector<std::string> encodings = header_values(req, "Transfer-Encoding");
  if (!encodings.empty()) {
    if (!lengths.empty())
      return {400, "the request has both Content-Length and Transfer-Encoding (RFC 9112 section 6.3); send one", {}};
    if (encodings.size() > 1 || encodings[0] != "chunked")
      return {501,
              fmt::format("Transfer-Encoding \"{}\" is not supported; send the body with Content-Length or "
                          "\"Transfer-Encoding: chunked\"",
                          fmt::join(encodings, ", ")),
              {}};
    return {};
  }
  for (const std::string& v : lengths)
    if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); }))
      return {400, fmt::format("Content-Length \"{}\" is not a byte count (0 .. 10^18)", v), {}};
  if (std::adjacent_find(lengths.begin(), lengths.end(), std::not_equal_to<>()) != lengths.end())
    return {400, fmt::format("the request has conflicting Content-Length headers ({})", fmt::join(lengths, ", ")), {}};
  if (!lengths.empty() && std::stoll(lengths[0]) > max_body_bytes)
    return {413,
            fmt::format("the request body ({} bytes) is larger than --max-body-bytes ({} bytes)", lengths[0],
                        max_body_bytes),
            {}};
  if (lengths.empty() && req.method == "POST")
    return {411, "a POST needs a Content-Length header or \"Transfer-Encoding: chunked\"", {}};
  return {};
}

HttpRefusal check_route(const httplib::Request& req, const std::vector<HttpRoute>& routes) {
  if (!served_method(req.method))
    return {501, fmt::format("the method {} is not supported; this server answers GET, HEAD and POST", req.method), {}};
  std::string allow;
  for (const HttpRoute& r : routes) {
    if (r.path != req.path) continue;
    if (r.method == req.method || (r.method == "GET" && req.method == "HEAD")) return {};
    allow += (allow.empty() ? "" : ", ") + (r.method == "GET" ? std::string("GET, HEAD") : r.method);
  }
  if (allow.empty())
    return {
        404,
        fmt::format("{} {} is not an endpoint of this server; it serves {}", req.method, req.path, route_list(routes)),
        {}};
  return {405, fmt::format("{} is not allowed on {}; it answers {}", req.method, req.path, allow), allow};
}

HttpRefusal check_json_content_type(const httplib::Request& req) {
  if (req.method != "POST") return {};
  const std::string type = lower_trimmed(req.get_header_value("Content-Type"));
  if (type.substr(0, type.find(';')) == "application/json") return {};
  return {415,
          fmt::format("{}; send the body as JSON with the header \"Content-Type: application/json\"",
                      type.empty() ? std::string("the request has no Content-Type")
                                   : fmt::format("Content-Type \"{}\" is not accepted", type)),
          {}};
}

HttpRefusal malformed_head_refusal(const httplib::Request& req, int status) {
  if (status == 414)
    return {414, fmt::format("the request line is longer than {} bytes", CPPHTTPLIB_REQUEST_URI_MAX_LENGTH), {}};
  if (!req.method.empty() && !httplib_method(req.method))
    return {501,
            fmt::format("the method \"{}\" is not supported; this server answers GET, HEAD and POST",
                        req.method.substr(0, 32)),
            {}};
  return {400,
          "the request line or a header is malformed; expected \"METHOD /path HTTP/1.1\" and \"Name: value\" lines, "
          "each ending in CRLF",
          {}};
}

}  // namespace zaya
