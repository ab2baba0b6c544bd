"""response_format through the official `openai` client (run by tests/e2e/serve_json.sh).

The tiny model knows nothing of JSON, so what it writes under a schema shows the
constraint alone: every finished answer must parse (json.loads) and validate
(validate() below, a checker of the schema keywords used here, written apart from
the server's automaton). Exits non-zero at the first failure.

Usage: serve_json.py BASE_URL API_KEY
"""
import json
import sys
from typing import List, Literal, Optional

import openai
import pydantic

base_url, api_key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=300)
messages = [{"role": "user", "content": "Describe a thing as JSON."}]
# Bounded strings, arrays and numbers: every value the schema allows fits in the token limit, so each answer ends.
MOTTO = 'say "hi" \\ back\n\tcaf\u00e9'
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "color": {"enum": ["red", "green", 'dark "blue"']},
        "motto": {"const": MOTTO},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "maxItems": 3},
        "point": {"$ref": "#/$defs/point"},
        "note": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "null"}]},
    },
    "required": ["name", "color", "motto", "tags", "point", "note"],
    "additionalProperties": False,
    "$defs": {"point": {"type": "object", "properties": {
        "x": {"type": "integer"}, "y": {"type": "number"}, "ok": {"type": "boolean"}},
        "required": ["x", "y", "ok"], "additionalProperties": False}},
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True}}


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def validate(v, s, root, at="$"):
    """Raises ValueError where `v` breaks `s` (the keywords SCHEMA uses)."""
    if "$ref" in s:
        return validate(v, root["$defs"][s["$ref"].split("/")[-1]], root, at)
    if "anyOf" in s:
        for alt in s["anyOf"]:
            try:
                return validate(v, alt, root, at)
            except ValueError:
                pass
        raise ValueError(f"{at}: {v!r} matches no alternative")
    if "enum" in s and v not in s["enum"]:
        raise ValueError(f"{at}: {v!r} not in {s['enum']}")
    if "const" in s and v != s["const"]:
        raise ValueError(f"{at}: {v!r} is not {s['const']!r}")
    t = s.get("type")
    checks = {"object": lambda: isinstance(v, dict), "array": lambda: isinstance(v, list),
              "string": lambda: isinstance(v, str), "boolean": lambda: isinstance(v, bool),
              "integer": lambda: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda: isinstance(v, (int, float)) and not isinstance(v, bool), "null": lambda: v is None}
    if t and not checks[t]():
        raise ValueError(f"{at}: {v!r} is not of type {t}")
    if t == "string" and len(v) > s.get("maxLength", 1 << 30):
        raise ValueError(f"{at}: {v!r} is longer than {s['maxLength']}")
    if t == "array":
        if not s.get("minItems", 0) <= len(v) <= s.get("maxItems", 1 << 30):
            raise ValueError(f"{at}: {len(v)} items")
        for i, x in enumerate(v):
            validate(x, s["items"], root, f"{at}[{i}]")
    if t == "object":
        for k in s.get("required", []):
            if k not in v:
                raise ValueError(f"{at}: {k!r} is missing")
        for k, x in v.items():
            if k not in s["properties"]:
                raise ValueError(f"{at}: {k!r} is not a property")
            validate(x, s["properties"][k], root, f"{at}.{k}")


def check(case, text, finish, schema=SCHEMA):
    if finish != "stop":
        fail(f"{case}: finish_reason {finish!r} (every value of the schema fits the token limit): {text!r}")
    try:
        value = json.loads(text)
    except ValueError as e:
        fail(f"{case}: the answer does not parse ({e}): {text!r}")
    try:
        validate(value, schema, schema)
    except ValueError as e:
        fail(f"{case}: the answer does not validate ({e}): {text!r}")
    print(f"ok: {case}: {text[:150]!r}", flush=True)
    return value


# json_schema, whole, several seeds and temperatures (greedy too); n = 2 in one request.
for seed, temperature in [(1, 1.0), (2, 1.5), (3, 0.0)]:
    r = client.chat.completions.create(model="tiny", messages=messages, response_format=FORMAT, max_tokens=1500,
                                       seed=seed, temperature=temperature)
    v = check(f"json_schema seed {seed} T {temperature}", r.choices[0].message.content, r.choices[0].finish_reason)
    if v["motto"] != MOTTO:
        fail(f"the escaped constant came back as {v['motto']!r}")
r = client.chat.completions.create(model="tiny", messages=messages, response_format=FORMAT, max_tokens=1500, seed=5,
                                   n=2)
for i, choice in enumerate(r.choices):
    check(f"json_schema n=2 choice {i}", choice.message.content, choice.finish_reason)

# Streamed: the deltas joined are the value.
text, finish = "", None
for chunk in client.chat.completions.create(model="tiny", messages=messages, response_format=FORMAT, max_tokens=1500,
                                            seed=7, stream=True):
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
check("json_schema streamed", text, finish)

# Completions (response_format through extra_body: not a parameter of the client's completions).
c = client.completions.create(model="tiny", prompt="A JSON thing:", max_tokens=1500, seed=8,
                              extra_body={"response_format": FORMAT})
check("completions json_schema", c.choices[0].text, c.choices[0].finish_reason)

# json_object: any object. Its values are unbounded, so a cut by the token limit is allowed (then the
# text is a prefix); an answer that ends must be an object.
for seed in (1, 2, 3):
    r = client.chat.completions.create(model="tiny", messages=messages, response_format={"type": "json_object"},
                                       max_tokens=400, seed=seed)
    content, finish = r.choices[0].message.content, r.choices[0].finish_reason
    if finish == "stop":
        if not isinstance(json.loads(content), dict):
            fail(f"json_object: {content!r} is not an object")
        print(f"ok: json_object seed {seed}: {content[:150]!r}", flush=True)
    elif finish == "length" and r.usage.completion_tokens == 400 and content.lstrip().startswith("{"):
        print(f"ok: json_object seed {seed} cut at 400 tokens: {content[:100]!r}...", flush=True)
    else:
        fail(f"json_object seed {seed}: finish {finish!r}: {content!r}")

# A token limit that cuts the value: finish_reason length, and the text is where the value was cut.
r = client.chat.completions.create(model="tiny", messages=messages, response_format=FORMAT, max_tokens=5, seed=1)
if r.choices[0].finish_reason != "length" or not r.choices[0].message.content.lstrip().startswith("{"):
    fail(f"max_tokens 5: {r.choices[0].finish_reason!r} {r.choices[0].message.content!r}")
print(f"ok: a value cut by max_tokens ends with finish_reason length: {r.choices[0].message.content!r}")


# The client's pydantic helper: it sends the model's strict schema ($defs, $ref, enums) and parses the answer.
class Point(pydantic.BaseModel):
    x: int
    ok: bool


class Thing(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=8)
    kind: Literal["cat", "dog"]
    where: Point
    tags: List[pydantic.constr(max_length=4)] = pydantic.Field(max_length=2)
    extra: Optional[bool]


parsed = client.chat.completions.parse(model="tiny", messages=messages, response_format=Thing, max_tokens=1500,
                                       seed=4)
thing = parsed.choices[0].message.parsed
if parsed.choices[0].finish_reason != "stop" or not isinstance(thing, Thing):
    fail(f"pydantic parse: {parsed.choices[0].finish_reason!r}: {parsed.choices[0].message.content!r}")
print(f"ok: the client's parse helper gives a Thing: {thing!r}")
print("serve_json: every answer parsed and validated")
