#pragma once
// JSON text as an automaton over bytes, for constrained decoding
// (docs/serve.md, "response_format"; token_constraint.h masks tokens with it).
// A grammar is a graph of nodes compiled from a JSON schema (json_schema.h)
// or the generic one of "any JSON object"; a JsonState is where a text is in
// it: a set of stacks of frames (one per open object, array, string, number or
// literal), several only while an anyOf has not decided between alternatives.
//
// What the automaton accepts is always valid JSON that validates against the
// schema it came from, and every prefix it accepts can be completed (unless
// the schema itself has no finite value, e.g. a property that requires itself):
// - whitespace only between tokens, at most kJsonMaxSpaces bytes in a row and
//   none after the top-level value (a model cannot loop forever on spaces);
// - numbers as JSON's grammar, at most kJsonMaxDigits digits in the integer
//   and in the fraction part and 2 in the exponent (an int64 or a double
//   holds every one); integers without fraction or exponent;
// - strings with JSON's escapes (\uXXXX other than a lone surrogate half,
//   D800-DFFF, refused) and well-formed UTF-8; minLength/maxLength count
//   characters (code points) as Python's jsonschema does;
// - an object with properties writes only those (in any order, each at most
//   once, the required ones before '}'), its keys spelled as the compact JSON
//   encoding of the name; one without properties takes any members;
// - generic values nest at most kJsonMaxDepth containers deep.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace zaya {

inline constexpr int32_t kJsonMaxSpaces = 16;
inline constexpr int32_t kJsonMaxDigits = 18;  // an integer of 18 digits fits an int64
inline constexpr int32_t kJsonMaxDepth = 32;

struct JsonNode {
  enum class Kind : uint8_t { kAny, kObject, kArray, kString, kInteger, kNumber, kLiteral, kAnyOf };
  Kind kind = Kind::kAny;
  struct Property {
    std::string key;  // the name's JSON encoding, without its quotes
    int32_t node = 0;
    bool required = false;
  };
  std::vector<Property> properties;  // kObject; empty: any members (kAny values)
  int32_t items = 0;                 // kArray: the items' node
  int64_t min_items = 0, max_items = std::numeric_limits<int64_t>::max();
  int64_t min_length = 0, max_length = std::numeric_limits<int64_t>::max();  // kString
  std::vector<std::string> literals;  // kLiteral: the JSON texts allowed (enum, const, true, false, null)
  std::vector<int32_t> alternatives;  // kAnyOf
};

// The most properties one object node may list (a bit each in a frame).
inline constexpr size_t kJsonMaxProperties = 64;

struct JsonGrammar {
  // Nodes 0..5 are the generic ones (any value, string, number, true/false/null,
  // object, array); `root` is the value the text is.
  static constexpr int32_t kAnyValue = 0, kAnyString = 1, kAnyNumber = 2, kAnyLiteral = 3, kAnyObject = 4,
                           kAnyArray = 5;
  std::vector<JsonNode> nodes;
  int32_t root = kAnyObject;
  JsonGrammar();  // the generic nodes; root: any object (response_format json_object)
  int32_t add(JsonNode node);
};

struct JsonFrame {
  int32_t node = 0;
  uint8_t phase = 0;
  uint8_t sub = 0;        // a string's escape state, a number's part
  uint8_t utf8_left = 0;  // a string's continuation bytes still due
  uint8_t utf8_lo = 0x80, utf8_hi = 0xBF;
  int64_t count = 0;  // characters of a string, items of an array, digits of a number's part, an object's key
  uint64_t used = 0;  // an object's properties written
  std::string typed;  // a schema object's key, a literal: the bytes so far
  bool operator==(const JsonFrame&) const = default;
};

struct JsonThread {
  std::vector<JsonFrame> stack;  // empty: the value is complete
  int32_t spaces = 0;            // whitespace bytes in a row
  bool operator==(const JsonThread&) const = default;
};

struct JsonState {
  std::vector<JsonThread> threads;  // none: dead (no text continues it)
};

JsonState json_start(const JsonGrammar& grammar);
// The state after byte `c`; dead (no threads) when the text cannot continue with it.
JsonState json_step(const JsonGrammar& grammar, const JsonState& state, unsigned char c);
// Whether the text so far is a whole value of the grammar.
bool json_complete(const JsonGrammar& grammar, const JsonState& state);
// When the state is inside a string's characters (one thread, no escape or
// UTF-8 character half written): how many more characters it may take
// (INT64_MAX: unbounded); -1 otherwise. Plain content then keeps the state but
// for the count (token_constraint.cc's fast path).
int64_t json_string_room(const JsonGrammar& grammar, const JsonState& state);
// A string that identifies the state (equal states, equal keys), for caches.
std::string json_state_key(const JsonState& state);
// Whether `text` is accepted as a whole value.
bool json_accepts(const JsonGrammar& grammar, const std::string& text);

}  // namespace zaya
