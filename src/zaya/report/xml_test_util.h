#pragma once
// Test helper: a strict little XML parser, enough to check that the SVG
// writers produce well-formed documents and to query their structure. It
// accepts an optional <?xml ...?> declaration, elements with double-quoted
// attributes, text, and the five predefined entities plus numeric references;
// anything else (a stray '<' or '&', a mismatched end tag, a duplicate
// attribute, text after the root) throws zaya::Error.

#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/core/error.h"

namespace zaya::testing {

struct XmlNode {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<XmlNode>> children;
  std::string text;  // all character data directly inside, entities decoded

  std::string attr(const std::string& key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? "" : it->second;
  }
  // Every descendant (and this node) matching `pred`, in document order.
  void find_all(const std::function<bool(const XmlNode&)>& pred, std::vector<const XmlNode*>& out) const {
    if (pred(*this)) out.push_back(this);
    for (const auto& c : children) c->find_all(pred, out);
  }
  std::vector<const XmlNode*> find(const std::string& tag, const std::string& cls = "") const {
    std::vector<const XmlNode*> out;
    find_all([&](const XmlNode& n) { return n.name == tag && (cls.empty() || n.attr("class") == cls); }, out);
    return out;
  }
};

class XmlParser {
 public:
  explicit XmlParser(std::string_view doc) : s_(doc) {}

  std::unique_ptr<XmlNode> parse() {
    skip_space();
    if (s_.substr(i_, 5) == "<?xml") {
      size_t end = s_.find("?>", i_);
      if (end == std::string_view::npos) fail("xml: unterminated declaration");
      i_ = end + 2;
    }
    skip_space();
    auto root = element();
    skip_space();
    if (i_ != s_.size()) fail("xml: content after the root element at offset {}", i_);
    return root;
  }

 private:
  bool name_char(char c) const {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.';
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    if (i_ >= s_.size() || s_[i_] != c) fail("xml: expected '{}' at offset {}", c, i_);
    ++i_;
  }
  std::string name() {
    size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    if (i_ == start) fail("xml: expected a name at offset {}", i_);
    return std::string(s_.substr(start, i_ - start));
  }
  // Decodes character data up to `stop` ('<' for text, '"' for attributes).
  std::string chars(char stop) {
    std::string out;
    while (i_ < s_.size() && s_[i_] != stop) {
      char c = s_[i_];
      if (c == '<') fail("xml: '<' inside an attribute value at offset {}", i_);
      if (c != '&') {
        out += c;
        ++i_;
        continue;
      }
      size_t semi = s_.find(';', i_);
      if (semi == std::string_view::npos) fail("xml: unterminated entity at offset {}", i_);
      std::string ent(s_.substr(i_ + 1, semi - i_ - 1));
      static const std::map<std::string, char> kEntities = {
          {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
      if (auto it = kEntities.find(ent); it != kEntities.end())
        out += it->second;
      else if (ent.size() > 1 && ent[0] == '#')
        out += '?';  // a numeric reference is well-formed; its value is not needed here
      else
        fail("xml: unknown entity '&{};' at offset {}", ent, i_);
      i_ = semi + 1;
    }
    return out;
  }
  std::unique_ptr<XmlNode> element() {
    expect('<');
    auto node = std::make_unique<XmlNode>();
    node->name = name();
    for (;;) {
      skip_space();
      if (i_ < s_.size() && (s_[i_] == '/' || s_[i_] == '>')) break;
      std::string key = name();
      skip_space();
      expect('=');
      skip_space();
      expect('"');
      std::string value = chars('"');
      expect('"');
      if (!node->attrs.emplace(key, value).second) fail("xml: duplicate attribute '{}' on <{}>", key, node->name);
    }
    if (s_.substr(i_, 2) == "/>") {
      i_ += 2;
      return node;
    }
    expect('>');
    for (;;) {
      node->text += chars('<');
      if (i_ >= s_.size()) fail("xml: <{}> is never closed", node->name);
      if (s_.substr(i_, 2) == "</") {
        i_ += 2;
        std::string end = name();
        if (end != node->name) fail("xml: </{}> closes <{}>", end, node->name);
        skip_space();
        expect('>');
        return node;
      }
      node->children.push_back(element());
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

inline std::unique_ptr<XmlNode> parse_xml(std::string_view doc) { return XmlParser(doc).parse(); }

}  // namespace zaya::testing
