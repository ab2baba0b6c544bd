#include "zaya/infer/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "zaya/io/json_file.h"

namespace zaya {

namespace {

using json = nlohmann::ordered_json;
using Kind = JsonNode::Kind;

// Thrown inside the compiler, caught at its top: the message and the keyword's path.
struct SchemaProblem {
  std::string path, message;
};

[[noreturn]] void refuse(const std::string& path, std::string message) {
  throw SchemaProblem{path, std::move(message)};
}

const std::set<std::string>& annotations() {
  static const std::set<std::string> a{"title",    "description", "default",  "examples",  "$schema", "$id",
                                       "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
  return a;
}

const std::set<std::string>& keywords() {
  static const std::set<std::string> k{"type",      "properties", "required", "additionalProperties",
                                       "items",     "minItems",   "maxItems", "minLength",
                                       "maxLength", "enum",       "const",    "anyOf",
                                       "oneOf",     "$ref"};
  return k;
}

constexpr const char* kSupported =
    "type, properties, required, additionalProperties (false), items, minItems, maxItems, minLength, maxLength, enum, "
    "const, anyOf, oneOf, $ref, $defs";

constexpr const char* kTypes = "object, array, string, integer, number, boolean, null";

// Bits of what a value of a node can start as, so oneOf's alternatives can be told apart.
enum Starts : uint32_t { kObj = 1, kArr = 2, kStr = 4, kNum = 8, kBool = 16, kNull = 32, kAll = 63 };

uint32_t literal_starts(const std::string& text) {
  switch (text[0]) {
    case '{': return kObj;
    case '[': return kArr;
    case '"': return kStr;
    case 't':
    case 'f': return kBool;
    case 'n': return kNull;
    default: return kNum;
  }
}

struct Compiler {
  const json& root;
  JsonGrammar g;
  std::map<std::string, int32_t> refs;  // $ref -> its node (set before it is compiled: recursion)

  int32_t add(JsonNode n, const std::string& path) {
    if (g.nodes.size() >= kJsonSchemaMaxNodes)
      refuse(path, fmt::format("the schema is too large: more than {} nodes", kJsonSchemaMaxNodes));
    return g.add(std::move(n));
  }

  static int64_t count_field(const json& s, const char* k, const std::string& path) {
    const json& v = s[k];
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
      refuse(path + "." + k, fmt::format("'{}' must be a non-negative integer; got {}", k, json_preview(v)));
    return v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
  }

  // A pair of count bounds (minItems/maxItems, minLength/maxLength): those given, the lower not above the upper.
  static void bounds(const json& s, const std::string& path, const char* lo_key, const char* hi_key, int64_t& lo,
                     int64_t& hi) {
    if (s.contains(lo_key)) lo = count_field(s, lo_key, path);
    if (s.contains(hi_key)) hi = count_field(s, hi_key, path);
    if (lo > hi) refuse(path + "." + lo_key, fmt::format("'{}' {} is above '{}' {}", lo_key, lo, hi_key, hi));
  }

  uint32_t starts(int32_t id, std::set<int32_t>& seen) const {
    if (!seen.insert(id).second) return 0;
    const JsonNode& n = g.nodes[size_t(id)];
    switch (n.kind) {
      case Kind::kAny: return kAll;
      case Kind::kObject: return kObj;
      case Kind::kArray: return kArr;
      case Kind::kString: return kStr;
      case Kind::kInteger:
      case Kind::kNumber: return kNum;
      case Kind::kLiteral: {
        uint32_t m = 0;
        for (const std::string& l : n.literals) m |= literal_starts(l);
        return m;
      }
      case Kind::kAnyOf: {
        uint32_t m = 0;
        for (int32_t a : n.alternatives) m |= starts(a, seen);
        return m;
      }
    }
    return kAll;
  }

  int32_t ref(const json& s, const std::string& path, int depth) {
    const json& r = s["$ref"];
    if (!r.is_string()) refuse(path + ".$ref", fmt::format("'$ref' must be a string; got {}", json_preview(r)));
    const std::string target = r.get<std::string>();
    if (auto it = refs.find(target); it != refs.end()) return it->second;
    const json* to = nullptr;
    if (target == "#") {
      to = &root;
    } else {
      for (const char* defs : {"#/$defs/", "#/definitions/"}) {
        const std::string prefix = defs;
        if (!target.starts_with(prefix)) continue;
        const std::string group = prefix.substr(2, prefix.size() - 3), name = target.substr(prefix.size());
        if (root.is_object() && root.contains(group) && root[group].is_object() && root[group].contains(name))
          to = &root[group][name];
      }
    }
    if (!to)
      refuse(path + ".$ref", fmt::format("'$ref' = {} does not resolve; allowed: \"#\", \"#/$defs/NAME\" or "
                                         "\"#/definitions/NAME\" naming a schema of this document",
                                         json_preview(r)));
    // The $ref's node, made before its target is compiled so that a recursive
    // $ref inside the target resolves to it: an any-of whose one alternative is
    // the target's compiled node (set just below; the recursive $defs case of
    // infer/json_grammar_test.cc).
    JsonNode hold;
    hold.kind = Kind::kAnyOf;
    const int32_t id = add(hold, path);
    refs[target] = id;
    const int32_t body = compile(*to, path + ".$ref", depth + 1);
    g.nodes[size_t(id)].alternatives = {body};
    return id;
  }

  int32_t literals(const std::vector<json>& values, const std::set<std::string>& types, const std::string& path) {
    if (values.empty()) refuse(path, "'enum' must list at least one value");
    if (values.size() > kJsonSchemaMaxEnum)
      refuse(path, fmt::format("'enum' lists {} values, more than the limit of {}", values.size(), kJsonSchemaMaxEnum));
    JsonNode n;
    n.kind = Kind::kLiteral;
    for (const json& v : values) {
      if (!types.empty() && !types.count(type_of(v)) && !(type_of(v) == "integer" && types.count("number")))
        refuse(path, fmt::format("the value {} is not of the schema's type", json_preview(v)));
      n.literals.push_back(v.dump());
    }
    return add(std::move(n), path);
  }

  static std::string type_of(const json& v) {
    if (v.is_object()) return "object";
    if (v.is_array()) return "array";
    if (v.is_string()) return "string";
    if (v.is_number_integer() || (v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>()))))
      return "integer";
    if (v.is_number()) return "number";
    if (v.is_boolean()) return "boolean";
    return "null";
  }

  int32_t object(const json& s, const std::string& path, int depth) {
    JsonNode n;
    n.kind = Kind::kObject;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (!a.is_boolean())
        refuse(path + ".additionalProperties",
               fmt::format("'additionalProperties' = {} is not supported; allowed: false or true (a schema is not "
                           "supported)",
                           json_preview(a)));
    }
    std::vector<std::pair<std::string, const json*>> props;
    if (s.contains("properties")) {
      const json& p = s["properties"];
      if (!p.is_object())
        refuse(path + ".properties", fmt::format("'properties' must be an object; got {}", json_preview(p)));
      if (p.size() > kJsonMaxProperties)
        refuse(path + ".properties", fmt::format("'properties' lists {} properties, more than the limit of {}",
                                                 p.size(), kJsonMaxProperties));
      for (auto it = p.begin(); it != p.end(); ++it) props.emplace_back(it.key(), &it.value());
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) refuse(path + ".required", fmt::format("'required' must be a list of property names"));
      for (size_t i = 0; i < r.size(); ++i) {
        const std::string at = fmt::format("{}.required[{}]", path, i);
        if (!r[i].is_string()) refuse(at, fmt::format("'required' must list strings; got {}", json_preview(r[i])));
        const std::string name = r[i].get<std::string>();
        if (std::none_of(props.begin(), props.end(), [&](const auto& p) { return p.first == name; }))
          refuse(at, fmt::format("the required property {} is not in 'properties'", json_preview(r[i])));
        required.insert(name);
      }
    }
    const int32_t id = add(n, path);  // the properties' nodes follow it
    std::vector<JsonNode::Property> out;
    for (const auto& [name, schema] : props) {
      JsonNode::Property p;
      const std::string quoted = json(name).dump();
      p.key = quoted.substr(1, quoted.size() - 2);
      p.required = required.count(name) > 0;
      // (a long name is cut in paths: a message never shows a client's value whole)
      const std::string shown = name.size() > 64 ? name.substr(0, 64) + "..." : name;
      p.node = compile(*schema, path + ".properties." + shown, depth + 1);
      out.push_back(std::move(p));
    }
    g.nodes[size_t(id)].properties = std::move(out);
    return id;
  }

  int32_t array(const json& s, const std::string& path, int depth) {
    JsonNode n;
    n.kind = Kind::kArray;
    bounds(s, path, "minItems", "maxItems", n.min_items, n.max_items);
    const int32_t id = add(n, path);
    const int32_t items =
        s.contains("items") ? compile(s["items"], path + ".items", depth + 1) : JsonGrammar::kAnyValue;
    g.nodes[size_t(id)].items = items;
    return id;
  }

  int32_t string(const json& s, const std::string& path) {
    JsonNode n;
    n.kind = Kind::kString;
    bounds(s, path, "minLength", "maxLength", n.min_length, n.max_length);
    return add(n, path);
  }

  // A value of one named type.
  int32_t typed(const json& s, const std::string& type, const std::string& path, int depth) {
    if (type == "object") return object(s, path, depth);
    if (type == "array") return array(s, path, depth);
    if (type == "string") return string(s, path);
    if (type == "integer" || type == "number") {
      JsonNode n;
      n.kind = type == "integer" ? Kind::kInteger : Kind::kNumber;
      return add(n, path);
    }
    if (type == "boolean") return literals({json(true), json(false)}, {}, path);
    return literals({json(nullptr)}, {}, path);  // null
  }

  int32_t alternatives(const json& s, const char* k, const std::string& path, int depth) {
    const json& a = s[k];
    const std::string at = path + "." + k;
    if (!a.is_array() || a.empty())
      refuse(at, fmt::format("'{}' must be a non-empty list of schemas; got {}", k, json_preview(a)));
    JsonNode n;
    n.kind = Kind::kAnyOf;
    for (size_t i = 0; i < a.size(); ++i)
      n.alternatives.push_back(compile(a[i], fmt::format("{}[{}]", at, i), depth + 1));
    if (std::string(k) == "oneOf") {
      uint32_t seen_starts = 0;
      for (size_t i = 0; i < n.alternatives.size(); ++i) {
        std::set<int32_t> seen;
        const uint32_t m = starts(n.alternatives[i], seen);
        if (m & seen_starts)
          refuse(fmt::format("{}[{}]", at, i),
                 "'oneOf' alternatives must be of different types (a value must match exactly one); use 'anyOf'");
        seen_starts |= m;
      }
    }
    return add(std::move(n), path);
  }

  int32_t compile(const json& s, const std::string& path, int depth) {
    if (depth > kJsonSchemaMaxDepth)
      refuse(path, fmt::format("the schema nests more than {} levels deep", kJsonSchemaMaxDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) refuse(path, "the schema `false` matches no value");
      return JsonGrammar::kAnyValue;
    }
    if (!s.is_object()) refuse(path, fmt::format("a schema must be an object; got {}", json_preview(s)));
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!keywords().count(it.key()) && !annotations().count(it.key()))
        refuse(path + "." + it.key(),
               fmt::format("the schema keyword '{}' is not supported; supported: {}", it.key(), kSupported));
    if (s.contains("$ref")) {
      if (s.size() > 1)
        for (auto it = s.begin(); it != s.end(); ++it)
          if (it.key() != "$ref" && !annotations().count(it.key()))
            refuse(path + "." + it.key(), fmt::format("'{}' beside '$ref' is not supported", it.key()));
      return ref(s, path, depth);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      const std::string at = path + ".type";
      std::vector<json> names = t.is_array() ? std::vector<json>(t.begin(), t.end()) : std::vector<json>{t};
      if (names.empty()) refuse(at, "'type' must name at least one type");
      for (const json& name : names) {
        const std::string n = name.is_string() ? name.get<std::string>() : "";
        if (n != "object" && n != "array" && n != "string" && n != "integer" && n != "number" && n != "boolean" &&
            n != "null")
          refuse(at,
                 fmt::format("'type' = {} is not a type; allowed: {} (or a list of them)", json_preview(name), kTypes));
        if (std::find(types.begin(), types.end(), n) == types.end()) types.push_back(n);
      }
    }
    const int branches =
        int(s.contains("enum")) + int(s.contains("const")) + int(s.contains("anyOf")) + int(s.contains("oneOf"));
    if (branches > 1) refuse(path, "only one of 'enum', 'const', 'anyOf' and 'oneOf' may be given in one schema");
    const std::set<std::string> type_set(types.begin(), types.end());
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array()) refuse(path + ".enum", fmt::format("'enum' must be a list; got {}", json_preview(e)));
      return literals(std::vector<json>(e.begin(), e.end()), type_set, path + ".enum");
    }
    if (s.contains("const")) return literals({s["const"]}, type_set, path + ".const");
    if (s.contains("anyOf") || s.contains("oneOf")) {
      if (!types.empty()) refuse(path + ".type", "'type' beside 'anyOf' or 'oneOf' is not supported: give it in each");
      return alternatives(s, s.contains("anyOf") ? "anyOf" : "oneOf", path, depth);
    }
    if (types.empty()) {
      // No type: an object when it has object keywords, an array when array ones, a string when string ones.
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
        types = {"object"};
      else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems"))
        types = {"array"};
      else if (s.contains("minLength") || s.contains("maxLength"))
        types = {"string"};
      else
        return JsonGrammar::kAnyValue;
    }
    if (types.size() == 1) return typed(s, types[0], path, depth);
    JsonNode n;
    n.kind = Kind::kAnyOf;
    for (const std::string& t : types) n.alternatives.push_back(typed(s, t, path, depth));
    return add(std::move(n), path);
  }
};

}  // namespace

JsonSchemaGrammar compile_json_schema(const nlohmann::ordered_json& schema, const std::string& path) {
  JsonSchemaGrammar out;
  Compiler c{schema, JsonGrammar{}, {}};
  try {
    c.g.root = c.compile(schema, path, 0);
    out.grammar = std::move(c.g);
  } catch (const SchemaProblem& p) {
    out.error = p.message;
    out.error_path = p.path;
  }
  return out;
}

}  // namespace zaya
