// The JSON automaton and the schema compiler: strings accepted and refused
// (nested objects, enums, arrays, escapes, UTF-8, numbers, whitespace bounds,
// anyOf, $ref recursion), and schemas refused with the path of the bad keyword.
#include "zaya/infer/json_grammar.h"

#include <gtest/gtest.h>

#include "zaya/infer/json_schema.h"

namespace zaya {
namespace {

using SchemaJson = nlohmann::ordered_json;

JsonGrammar compiled_schema(const char* text) {
  const JsonSchemaGrammar s = compile_json_schema(SchemaJson::parse(text), "schema");
  EXPECT_EQ(s.error, "") << s.error_path;
  return s.grammar;
}

TEST(JsonGrammar, AnyObjectTakesJsonObjectsOnly) {
  const JsonGrammar g;
  for (const char* ok : {"{}", "{\"a\":1}", " { \"a\" : [1, 2.5, -0.5e+3, true, null, \"x\"], \"b\": {\"c\": {}} }",
                         "{\"s\":\"q\\\" b\\\\ n\\n u\\u00e9 \xC3\xA9 \xF0\x9F\x98\x80\"}", "{\"a\":0,\"a\":1}"})
    EXPECT_TRUE(json_accepts(g, ok)) << ok;
  for (const char* bad : {"",
                          "[]",
                          "1",
                          "\"x\"",
                          "{",
                          "{\"a\"}",
                          "{\"a\":}",
                          "{\"a\":1,}",
                          "{,}",
                          "{\"a\":01}",
                          "{\"a\":1.}",
                          "{\"a\":.5}",
                          "{\"a\":+1}",
                          "{\"a\":1e}",
                          "{\"a\":tru}",
                          "{\"a\":\"\\x\"}",
                          "{\"a\":\"\\u12\"}",
                          "{\"a\":\"\\ud800\"}",
                          "{\"a\":\"\x01\"}",
                          "{\"a\":\"\xC3\"}",
                          "{\"a\":\"\xC0\xAF\"}",
                          "{\"a\":\"\xED\xA0\x80\"}",
                          "{} ",
                          "{}{}",
                          "{\"a\":1]"})
    EXPECT_FALSE(json_accepts(g, bad)) << bad;
}

TEST(JsonGrammar, WhitespaceAndDigitsAreBounded) {
  const JsonGrammar g;
  EXPECT_TRUE(json_accepts(g, "{" + std::string(kJsonMaxSpaces, ' ') + "}"));
  EXPECT_FALSE(json_accepts(g, "{" + std::string(kJsonMaxSpaces + 1, ' ') + "}"));
  EXPECT_TRUE(json_accepts(g, "{\"a\":" + std::string(kJsonMaxDigits, '7') + "}"));
  EXPECT_FALSE(json_accepts(g, "{\"a\":" + std::string(kJsonMaxDigits + 1, '7') + "}"));
  std::string deep = "{\"a\":", end = "}";
  for (int i = 0; i < kJsonMaxDepth; ++i) deep += "[", end = "]" + end;
  EXPECT_FALSE(json_accepts(g, deep + "1" + end));  // one container too deep
  EXPECT_TRUE(json_accepts(g, deep.substr(0, deep.size() - 1) + "1" + end.substr(1)));
}

TEST(JsonGrammar, SchemaObjectsEnumsArraysAndStrings) {
  const JsonGrammar g = compiled_schema(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":5},
      "color":{"enum":["red","green","dark \"blue\""]},
      "tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2},
      "inner":{"type":"object","properties":{"n":{"type":"integer"},"x":{"type":"number"}},"required":["n"],
               "additionalProperties":false},
      "ok":{"type":["boolean","null"]}},
    "required":["name","color"],"additionalProperties":false})");
  for (const char* ok : {R"({"name":"ab","color":"red"})", R"({"color":"dark \"blue\"","name":"\u00e9\n\"\\"})",
                         R"({"name":"","color":"green","tags":["a"],"inner":{"n":-3},"ok":null})",
                         R"({"name":"x","color":"red","tags":["a","b"],"inner":{"x":-0.5e+3,"n":0},"ok":true})",
                         "{ \"name\" : \"\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\" ,\n \"color\":\"red\" }"})
    EXPECT_TRUE(json_accepts(g, ok)) << ok;
  for (const char* bad : {R"({"name":"ab"})",                                    // color required
                          R"({"name":"ab","color":"blue"})",                     // not in the enum
                          R"({"name":"abcdef","color":"red"})",                  // maxLength 5
                          R"({"name":"a","color":"red","other":1})",             // not a listed property
                          R"({"name":"a","name":"b","color":"red"})",            // twice
                          R"({"name":"a","color":"red","tags":[]})",             // minItems 1
                          R"({"name":"a","color":"red","tags":["a","b","c"]})",  // maxItems 2
                          R"({"name":"a","color":"red","inner":{"n":1.5}})",     // integer
                          R"({"name":"a","color":"red","inner":{"x":1}})",       // n required
                          R"({"name":"a","color":"red","ok":1})", R"({"name":1,"color":"red"})"})
    EXPECT_FALSE(json_accepts(g, bad)) << bad;
}

TEST(JsonGrammar, AnyOfRefsAndRecursion) {
  const JsonGrammar g = compiled_schema(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"anyOf":[{"type":"integer"},{"type":"string","minLength":2}]},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},
    "$ref":"#/$defs/node"})");
  EXPECT_TRUE(json_accepts(g, R"({"v":1,"kids":[{"v":"ab"},{"v":2,"kids":[{"v":12}]}]})"));
  EXPECT_TRUE(json_accepts(g, R"({"v":10})"));
  EXPECT_FALSE(json_accepts(g, R"({"v":"a"})"));
  EXPECT_FALSE(json_accepts(g, R"({"v":1,"kids":[{"v":true}]})"));
  const JsonGrammar num = compiled_schema(R"({"enum":[1, 12, "x"]})");
  EXPECT_TRUE(json_accepts(num, "1"));
  EXPECT_TRUE(json_accepts(num, "12"));
  EXPECT_FALSE(json_accepts(num, "2"));
  EXPECT_TRUE(json_accepts(compiled_schema(R"({"type":"number"})"), "-0.5e+3"));
  EXPECT_FALSE(json_accepts(compiled_schema(R"({"type":"integer"})"), "1e3"));
}

TEST(JsonGrammar, StateKeysTellStatesApart) {
  const JsonGrammar g;
  JsonState a = json_step(g, json_start(g), '{'), b = json_step(g, a, ' ');
  EXPECT_NE(json_state_key(a), json_state_key(b));
  EXPECT_EQ(json_state_key(json_step(g, json_start(g), '{')), json_state_key(a));
}

// The path of the bad keyword and a message naming it.
void schema_refused(const char* text, const std::string& path, const std::string& words) {
  const JsonSchemaGrammar s = compile_json_schema(SchemaJson::parse(text), "rf.schema");
  EXPECT_EQ(s.error_path, path) << text << ": " << s.error;
  EXPECT_NE(s.error.find(words), std::string::npos) << s.error;
}

TEST(JsonSchema, BadSchemasNameTheField) {
  schema_refused(R"({"type":"object","properties":{"x":{"type":"strng"}}})", "rf.schema.properties.x.type",
                 "not a type");
  schema_refused(R"({"type":"string","pattern":"a+"})", "rf.schema.pattern", "'pattern' is not supported");
  schema_refused(R"({"type":"string","format":"date"})", "rf.schema.format", "'format' is not supported");
  schema_refused(R"({"type":"integer","minimum":0})", "rf.schema.minimum", "'minimum' is not supported");
  schema_refused(R"({"type":"object","additionalProperties":{"type":"string"}})", "rf.schema.additionalProperties",
                 "a schema is not supported");
  schema_refused(R"({"type":"object","properties":{"a":{}},"required":["b"]})", "rf.schema.required[0]", "not in");
  schema_refused(R"({"type":"array","minItems":3,"maxItems":2})", "rf.schema.minItems", "above");
  schema_refused(R"({"type":"array","maxItems":-1})", "rf.schema.maxItems", "non-negative");
  schema_refused(R"({"enum":[]})", "rf.schema.enum", "at least one");
  schema_refused(R"({"type":"integer","enum":[1.5]})", "rf.schema.enum", "not of the schema's type");
  schema_refused(R"({"$ref":"#/$defs/nope"})", "rf.schema.$ref", "does not resolve");
  schema_refused(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "rf.schema.oneOf[1]", "different types");
  schema_refused(R"([1])", "rf.schema", "must be an object");
  schema_refused(R"(false)", "rf.schema", "matches no value");
  const JsonSchemaGrammar long_name =
      compile_json_schema(SchemaJson{{"properties", {{std::string(100000, 'k'), {{"type", "nope"}}}}}}, "s");
  EXPECT_EQ(long_name.error_path, "s.properties." + std::string(64, 'k') + "....type");
  std::string deep = "{}";
  for (int i = 0; i <= kJsonSchemaMaxDepth; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  const JsonSchemaGrammar d = compile_json_schema(SchemaJson::parse(deep), "s");
  EXPECT_NE(d.error.find("levels deep"), std::string::npos) << d.error;
  SchemaJson wide = {{"type", "object"}, {"properties", SchemaJson::object()}};
  for (size_t i = 0; i <= kJsonMaxProperties; ++i) wide["properties"]["p" + std::to_string(i)] = SchemaJson::object();
  EXPECT_NE(compile_json_schema(wide, "s").error.find("limit of"), std::string::npos);
  SchemaJson big = SchemaJson::array();
  for (size_t i = 0; i < kJsonSchemaMaxNodes; ++i) big.push_back({{"type", "array"}, {"items", {{"type", "string"}}}});
  EXPECT_NE(compile_json_schema(SchemaJson{{"anyOf", big}}, "s").error.find("too large"), std::string::npos);
}

}  // namespace
}  // namespace zaya
