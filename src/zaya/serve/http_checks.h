#pragma once
// Checks of a request's head that zaya serve makes before it reads the body
// (httplib's pre-routing hook), each refusal with a status and a sentence:
//  - the body's framing (RFC 9112 section 6): one Content-Length, a byte
//    count, not above --max-body-bytes (413 at once, not after reading the
//    claimed body); Transfer-Encoding only "chunked" and never beside a
//    Content-Length (a request-smuggling shape behind a proxy); a POST has one
//    or the other (411);
//  - the method and path against the fixed routes: 404, 405 with Allow, 501;
//  - a POST's Content-Type: application/json (415 otherwise). The CORS
//    "simple request" types (text/plain, form-urlencoded, multipart) are what
//    a web page can send to localhost without the user's consent.

#include <httplib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct HttpRefusal {
  int status = 0;  // 0: accepted
  std::string message;
  std::string allow;  // for 405: the methods the path takes
  explicit operator bool() const { return status != 0; }
};

struct HttpRoute {
  std::string method;  // "GET" (HEAD too) or "POST"
  std::string path;
};

HttpRefusal check_body_framing(const httplib::Request& req, int64_t max_body_bytes);
HttpRefusal check_route(const httplib::Request& req, const std::vector<HttpRoute>& routes);
HttpRefusal check_json_content_type(const httplib::Request& req);

// The sentence for a request httplib refused before the routes saw it (the
// request line or a header malformed, an unknown method, the target too long).
HttpRefusal malformed_head_refusal(const httplib::Request& req, int status);

}  // namespace zaya
