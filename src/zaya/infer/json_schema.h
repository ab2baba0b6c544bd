#pragma once
// A JSON schema compiled into the byte automaton of constrained decoding
// (json_grammar.h; docs/serve.md, "response_format", lists what is supported).
//
// Supported: type (a name or a list of them: object, array, string, integer,
// number, boolean, null), properties, required, additionalProperties (false,
// or true: only the listed properties are written either way; a schema is not
// supported), items, minItems, maxItems, minLength, maxLength, enum, const,
// anyOf, oneOf (its alternatives must be of different types, so that a value
// matches one only), $ref to "#", "#/$defs/NAME" or "#/definitions/NAME"
// (recursion allowed), and the annotations title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly. Anything
// else (pattern, format, minimum, allOf, ...) is refused by name: a keyword
// the automaton does not enforce could let through a value that fails it.
// A schema `true` is any value; `false` is refused.
//
// Limits (a hostile schema is refused, never runs away): kJsonSchemaMaxDepth
// nested schemas, kJsonSchemaMaxNodes compiled nodes, kJsonSchemaMaxEnum
// values per enum, kJsonMaxProperties properties per object.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "zaya/infer/json_grammar.h"

namespace zaya {

inline constexpr int kJsonSchemaMaxDepth = 32;
inline constexpr size_t kJsonSchemaMaxNodes = 2048;
inline constexpr size_t kJsonSchemaMaxEnum = 256;

struct JsonSchemaGrammar {
  JsonGrammar grammar;
  // Why the schema cannot be compiled, and where: `path` extended by the
  // keywords down to the bad one (e.g. PATH.properties.x.type).
  std::string error, error_path;
};

// `schema` as the grammar of its values; `path` names it in errors.
JsonSchemaGrammar compile_json_schema(const nlohmann::ordered_json& schema, const std::string& path);

}  // namespace zaya
