// Constrained decoding against a fake model: random logits, masked by a JSON
// constraint, sampled as the server samples. Every finished text parses
// (nlohmann's parser, not the automaton) and validates against the schema (a
// checker written here, apart from the automaton); every text cut by the
// token limit is a prefix the automaton still continues; and each mask equals
// the brute-force one (every token's text stepped on its own).
#include "zaya/infer/token_constraint.h"

#include <gtest/gtest.h>

#include <cmath>

#include "zaya/core/rng.h"
#include "zaya/infer/json_schema.h"
#include "zaya/infer/sampling.h"

namespace zaya {
namespace {

using SchemaJson = nlohmann::ordered_json;

// A vocabulary: id 0 the stop id (no text), 1 a control piece (no text), the
// printable ASCII bytes, whitespace, UTF-8 bytes of 'é' and '😀' one by one, and merged pieces.
std::vector<std::string> constraint_fake_vocab() {
  std::vector<std::string> v{"", ""};
  for (int c = 0x20; c < 0x7F; ++c) v.push_back(std::string(1, char(c)));
  for (const char* s :
       {"\n",  "\t",  "\xC3", "\xA9", "\xF0",  "\x9F",    "\x98",  "\x80",   "\xC3\xA9", "{\"",   "\":", "\",",
        "\"}", " \"", ", \"", "true", "false", "null",    "12",    "-0",     ".5",       "e+",    "E-3", "\\u00",
        "e9",  "\\n", "\\\"", "\\\\", "red",   "\"red\"", "green", "name",   "tags",     "inner", "\"n", "  ",
        "}}",  "]}",  "[\"",  "\"]",  "0,",    "1}",      "ab\"",  "x\":\"", "\": {\""})
    v.push_back(s);
  return v;
}

const char* kConstraintSchema = R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":6},
    "color":{"enum":["red","green","dark \"blue\""]},
    "tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3},
    "inner":{"type":"object","properties":{"n":{"type":"integer"},"x":{"type":"number"},
             "any":{}},"required":["n"],"additionalProperties":false},
    "ok":{"anyOf":[{"type":"boolean"},{"type":"null"}]}},
  "required":["name","color"],"additionalProperties":false})";

int64_t schema_code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Whether `v` validates against `s` (the keywords kConstraintSchema uses), written apart from the automaton.
bool schema_valid(const SchemaJson& v, const SchemaJson& s) {
  if (s.contains("anyOf"))
    return std::any_of(s["anyOf"].begin(), s["anyOf"].end(), [&](const SchemaJson& a) { return schema_valid(v, a); });
  if (s.contains("enum")) return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  if (!s.contains("type")) return true;
  const std::string t = s["type"];
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "string")
    return v.is_string() && schema_code_points(v.get<std::string>()) <= s.value("maxLength", INT64_MAX);
  if (t == "array") {
    if (!v.is_array() || int64_t(v.size()) < s.value("minItems", 0) ||
        int64_t(v.size()) > s.value("maxItems", INT64_MAX))
      return false;
    return std::all_of(v.begin(), v.end(), [&](const SchemaJson& x) { return schema_valid(x, s["items"]); });
  }
  if (!v.is_object()) return false;
  for (const auto& r : s["required"])
    if (!v.contains(r.get<std::string>())) return false;
  for (auto it = v.begin(); it != v.end(); ++it)
    if (!s["properties"].contains(it.key()) || !schema_valid(it.value(), s["properties"][it.key()])) return false;
  return true;
}

struct ConstrainedRun {
  std::string text;
  bool stopped = false;
};

// One sequence: random logits (closing tokens favoured so texts end), masked, sampled.
ConstrainedRun sample_constrained(const TokenConstraintFactory& make, const TokenTexts& texts, Rng& rng,
                                  int64_t max_tokens, bool check_masks, const JsonGrammar& g) {
  std::unique_ptr<TokenConstraint> c = make();
  const int64_t V = texts.size();
  std::vector<float> logits(static_cast<size_t>(V));
  SamplingScratch scratch;
  SamplingOptions o;
  o.temperature = 1.0;
  o.top_k = 0;
  o.top_p = 1.0;
  ConstrainedRun r;
  JsonState state = json_start(g);
  for (int64_t step = 0; step < max_tokens; ++step) {
    for (int64_t v = 0; v < V; ++v) {
      const std::string& t = texts.text(int32_t(v));
      const bool closes = v == 0 || t == "\"" || t == "}" || t == "]" || t == "\"}" || t == "]}" || t == "}}";
      logits[size_t(v)] = float(rng.next_double() * 4.0) + (closes ? 3.0f : 0.0f);
    }
    const bool any = c->mask(logits.data(), V);
    EXPECT_TRUE(any) << r.text;
    if (!any) break;
    if (check_masks)
      for (int64_t v = 2; v < V; ++v) {
        JsonState s = state;
        for (unsigned char ch : texts.text(int32_t(v))) {
          s = json_step(g, s, ch);
          if (s.threads.empty()) break;
        }
        EXPECT_EQ(std::isinf(logits[size_t(v)]), s.threads.empty())
            << "token '" << texts.text(int32_t(v)) << "' after '" << r.text << "'";
      }
    EXPECT_EQ(std::isinf(logits[0]), !json_complete(g, state)) << r.text;  // the stop id: exactly when complete
    EXPECT_TRUE(std::isinf(logits[1]));                                    // a piece without text: never
    const int32_t id = sample_token(logits.data(), V, o, rng, scratch);
    c->accept(id);
    if (id == 0) {
      r.stopped = true;
      break;
    }
    r.text += texts.text(id);
    for (unsigned char ch : texts.text(id)) state = json_step(g, state, ch);
  }
  return r;
}

TEST(TokenConstraint, RandomMaskedSamplingAlwaysGivesValidJson) {
  const SchemaJson schema = SchemaJson::parse(kConstraintSchema);
  const JsonSchemaGrammar compiled = compile_json_schema(schema, "schema");
  ASSERT_EQ(compiled.error, "");
  auto g = std::make_shared<const JsonGrammar>(compiled.grammar);
  auto texts = std::make_shared<const TokenTexts>(constraint_fake_vocab());
  const TokenConstraintFactory make = json_constraint(g, texts, {0});
  Rng rng{7, 1, 0};
  int64_t finished = 0, cut = 0;
  for (int i = 0; i < 300; ++i) {
    const ConstrainedRun r = sample_constrained(make, *texts, rng, 160, i < 10, *g);
    if (r.stopped) {
      ++finished;
      SchemaJson v;
      ASSERT_NO_THROW(v = SchemaJson::parse(r.text)) << r.text;
      EXPECT_TRUE(schema_valid(v, schema)) << r.text;
    } else {
      ++cut;  // the token limit: the text is a prefix that can still be completed
      JsonState s = json_start(*g);
      for (unsigned char ch : r.text) s = json_step(*g, s, ch);
      EXPECT_FALSE(s.threads.empty()) << r.text;
    }
  }
  EXPECT_GT(finished, 100);  // most texts end: the property is tested on many whole values
  RecordProperty("cut", int(cut));
}

TEST(TokenConstraint, AnyJsonObjectWithTheGenericGrammar) {
  auto g = std::make_shared<const JsonGrammar>();
  auto texts = std::make_shared<const TokenTexts>(constraint_fake_vocab());
  const TokenConstraintFactory make = json_constraint(g, texts, {0});
  Rng rng{11, 1, 0};
  int64_t finished = 0;
  for (int i = 0; i < 200; ++i) {
    const ConstrainedRun r = sample_constrained(make, *texts, rng, 200, i < 5, *g);
    if (!r.stopped) continue;
    ++finished;
    SchemaJson v;
    ASSERT_NO_THROW(v = SchemaJson::parse(r.text)) << r.text;
    EXPECT_TRUE(v.is_object()) << r.text;
  }
  EXPECT_GT(finished, 50);
}

TEST(TokenConstraint, StopIdOnlyOnceTheValueIsComplete) {
  auto g = std::make_shared<const JsonGrammar>();
  auto texts = std::make_shared<const TokenTexts>(std::vector<std::string>{"", "{", "}", " {"});
  std::unique_ptr<TokenConstraint> c = json_constraint(g, texts, {0})();
  std::vector<float> logits(4, 0.0f);
  ASSERT_TRUE(c->mask(logits.data(), 4));
  EXPECT_FALSE(std::isinf(logits[1]));
  EXPECT_FALSE(std::isinf(logits[3]));  // leading whitespace before the value
  EXPECT_TRUE(std::isinf(logits[0]) && std::isinf(logits[2]));
  c->accept(1);
  c->accept(2);
  EXPECT_TRUE(c->complete());
  std::fill(logits.begin(), logits.end(), 0.0f);
  ASSERT_TRUE(c->mask(logits.data(), 4));
  EXPECT_FALSE(std::isinf(logits[0]));  // only the stop id
  EXPECT_TRUE(std::isinf(logits[1]) && std::isinf(logits[2]) && std::isinf(logits[3]));
}

}  // namespace
}  // namespace zaya
