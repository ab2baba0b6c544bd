#include "zaya/infer/json_grammar.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

JsonGrammar::JsonGrammar() {
  using K = JsonNode::Kind;
  nodes.resize(6);
  nodes[kAnyValue].kind = K::kAny;
  nodes[kAnyString].kind = K::kString;
  nodes[kAnyNumber].kind = K::kNumber;
  nodes[kAnyLiteral].kind = K::kLiteral;
  nodes[kAnyLiteral].literals = {"true", "false", "null"};
  nodes[kAnyObject].kind = K::kObject;
  nodes[kAnyArray].kind = K::kArray;
  nodes[kAnyArray].items = kAnyValue;
}

int32_t JsonGrammar::add(JsonNode node) {
  nodes.push_back(std::move(node));
  return int32_t(nodes.size() - 1);
}

namespace {

using Kind = JsonNode::Kind;

// Where a frame is.
enum Phase : uint8_t {
  kValue,     // before a value of the node (whitespace allowed)
  kObjOpen,   // after '{'
  kObjKey,    // inside a listed property's key (typed: its bytes so far)
  kObjColon,  // after a key (count: the listed property; free objects: -1)
  kObjAfter,  // after a member's value
  kObjNext,   // after ','
  kArrOpen,   // after '['
  kArrAfter,  // after an item
  kString,    // inside a string
  kNumber,    // inside a number (sub: its part)
  kLiteral,   // inside a literal (typed: its bytes so far)
};

// A number's parts (JSON's grammar); complete in kZero, kInt, kFrac and kExp.
enum NumberPart : uint8_t { kStart, kMinus, kZero, kInt, kDot, kFrac, kE, kESign, kExp };

// String escape states: after '\', then \u's hex digits (the second after a 'd' must be 0-7: no surrogates).
enum Escape : uint8_t { kPlain, kBackslash, kHex1, kHex2, kHex2AfterD, kHex3, kHex4 };

bool json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool json_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool json_hex(unsigned char c) { return json_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

struct Stepper {
  const JsonGrammar& g;
  std::vector<JsonThread>& out;

  const JsonNode& node(const JsonFrame& f) const { return g.nodes[size_t(f.node)]; }

  void emit(JsonThread t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
  }

  static bool number_complete(const JsonFrame& f) {
    return f.sub == kZero || f.sub == kInt || f.sub == kFrac || f.sub == kExp;
  }
  bool literal_complete(const JsonFrame& f) const {
    const auto& l = node(f).literals;
    return std::find(l.begin(), l.end(), f.typed) != l.end();
  }
  int64_t containers(const JsonThread& t) const {
    int64_t n = 0;
    for (const JsonFrame& f : t.stack) n += f.phase >= kObjOpen && f.phase <= kArrAfter;
    return n;
  }

  // Whether every required property of an object frame is written.
  bool required_done(const JsonFrame& f) const {
    const auto& props = node(f).properties;
    for (size_t i = 0; i < props.size(); ++i)
      if (props[i].required && !(f.used >> i & 1)) return false;
    return true;
  }
  bool property_left(const JsonFrame& f) const {
    const auto& props = node(f).properties;
    return props.empty() || f.used != (props.size() == 64 ? ~uint64_t(0) : (uint64_t(1) << props.size()) - 1);
  }

  // The frame is done: its parent continues after it.
  void pop(JsonThread t) {
    t.stack.pop_back();
    emit(std::move(t));
  }

  // Byte c (not whitespace at a gap) starts a value of `n` in place of the top frame.
  void start_value(JsonThread t, int32_t n, unsigned char c) {
    const JsonNode& v = g.nodes[size_t(n)];
    JsonFrame f;
    f.node = n;
    switch (v.kind) {
      case Kind::kAny: {
        int32_t to = -1;
        if (c == '{' || c == '[') {
          if (containers(t) >= kJsonMaxDepth) return;
          to = c == '{' ? JsonGrammar::kAnyObject : JsonGrammar::kAnyArray;
        } else if (c == '"') {
          to = JsonGrammar::kAnyString;
        } else if (c == '-' || json_digit(c)) {
          to = JsonGrammar::kAnyNumber;
        } else if (c == 't' || c == 'f' || c == 'n') {
          to = JsonGrammar::kAnyLiteral;
        } else {
          return;
        }
        return start_value(std::move(t), to, c);
      }
      case Kind::kAnyOf:
        for (int32_t a : v.alternatives) start_value(t, a, c);
        return;
      case Kind::kObject:
        if (c != '{') return;
        f.phase = kObjOpen;
        break;
      case Kind::kArray:
        if (c != '[') return;
        f.phase = kArrOpen;
        break;
      case Kind::kString:
        if (c != '"') return;
        f.phase = kString;
        break;
      case Kind::kInteger:
      case Kind::kNumber:
        f.phase = kNumber;
        f.sub = kStart;
        t.stack.back() = f;
        return number(std::move(t), c);
      case Kind::kLiteral:
        f.phase = kLiteral;
        t.stack.back() = f;
        return literal(std::move(t), c);
    }
    t.stack.back() = f;
    emit(std::move(t));
  }

  void number(JsonThread t, unsigned char c) {
    JsonFrame& f = t.stack.back();
    const bool integer = node(f).kind == Kind::kInteger;
    const uint8_t part = f.sub;
    auto go = [&](NumberPart to, int64_t count) {
      JsonThread n = t;
      n.stack.back().sub = to;
      n.stack.back().count = count;
      emit(std::move(n));
    };
    if (json_digit(c)) {
      if (part == kStart || part == kMinus) {
        go(c == '0' ? kZero : kInt, 1);
      } else if (part == kInt && f.count < kJsonMaxDigits) {
        go(kInt, f.count + 1);
      } else if (part == kDot || (part == kFrac && f.count < kJsonMaxDigits)) {
        go(kFrac, part == kDot ? 1 : f.count + 1);
      } else if (part == kE || part == kESign || (part == kExp && f.count < 2)) {
        go(kExp, part == kExp ? f.count + 1 : 1);
      }
    } else if (c == '-' && part == kStart) {
      go(kMinus, 0);
    } else if (c == '.' && !integer && (part == kZero || part == kInt)) {
      go(kDot, 0);
    } else if ((c == 'e' || c == 'E') && !integer && (part == kZero || part == kInt || part == kFrac)) {
      go(kE, 0);
    } else if ((c == '+' || c == '-') && part == kE) {
      go(kESign, 0);
    }
    // A complete number also ends at a byte that cannot extend it: its parent takes the byte.
    if (number_complete(f)) {
      t.stack.pop_back();
      step(std::move(t), c);
    }
  }

  void literal(JsonThread t, unsigned char c) {
    const JsonFrame& f = t.stack.back();
    const auto& lits = node(f).literals;
    const std::string next = f.typed + char(c);
    if (std::any_of(lits.begin(), lits.end(), [&](const std::string& l) { return l.starts_with(next); })) {
      JsonThread n = t;
      n.stack.back().typed = next;
      emit(std::move(n));
    }
    if (literal_complete(f)) {
      t.stack.pop_back();
      step(std::move(t), c);
    }
  }

  void string(JsonThread t, unsigned char c) {
    JsonFrame& f = t.stack.back();
    const JsonNode& n = node(f);
    if (f.utf8_left > 0) {  // a character's continuation byte
      if (c < f.utf8_lo || c > f.utf8_hi) return;
      --f.utf8_left;
      f.utf8_lo = 0x80;
      f.utf8_hi = 0xBF;
      return emit(std::move(t));
    }
    switch (f.sub) {
      case kPlain: break;
      case kBackslash:
        if (c == 'u') {
          f.sub = kHex1;
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
          f.sub = kPlain;
        } else {
          return;
        }
        return emit(std::move(t));
      case kHex1:
        if (!json_hex(c)) return;
        f.sub = c == 'd' || c == 'D' ? kHex2AfterD : kHex2;
        return emit(std::move(t));
      case kHex2AfterD:
        if (c < '0' || c > '7') return;
        f.sub = kHex3;
        return emit(std::move(t));
      default:  // kHex2, kHex3, kHex4
        if (!json_hex(c)) return;
        f.sub = f.sub == kHex4 ? uint8_t(kPlain) : uint8_t(f.sub == kHex2 ? kHex3 : kHex4);
        return emit(std::move(t));
    }
    if (c == '"') {
      if (f.count >= n.min_length) pop(std::move(t));
      return;
    }
    if (c < 0x20 || f.count >= n.max_length) return;  // a raw control byte, or one character too many
    if (c >= 0x80) {  // a UTF-8 lead byte and the range of the next (Unicode's table 3-7: no overlongs, no surrogates)
      if (c >= 0xC2 && c <= 0xDF) {
        f.utf8_left = 1;
      } else if (c >= 0xE0 && c <= 0xEF) {
        f.utf8_left = 2;
        if (c == 0xE0) f.utf8_lo = 0xA0;
        if (c == 0xED) f.utf8_hi = 0x9F;
      } else if (c >= 0xF0 && c <= 0xF4) {
        f.utf8_left = 3;
        if (c == 0xF0) f.utf8_lo = 0x90;
        if (c == 0xF4) f.utf8_hi = 0x8F;
      } else {
        return;
      }
    }
    if (c == '\\') f.sub = kBackslash;
    // Characters are counted while a bound needs them (an unbounded string's state then repeats: token_constraint's
    // cache).
    if (n.max_length != std::numeric_limits<int64_t>::max() || f.count < n.min_length) ++f.count;
    emit(std::move(t));
  }

  // A gap's whitespace: at most kJsonMaxSpaces in a row.
  void space(JsonThread t) {
    if (t.spaces >= kJsonMaxSpaces) return;
    ++t.spaces;
    emit(std::move(t));
  }

  // A '"' that opens a key of an object frame (after '{' or ',').
  void open_key(JsonThread t) {
    JsonFrame& f = t.stack.back();
    if (node(f).properties.empty()) {  // any member: the key is any string
      f.phase = kObjColon;
      f.count = -1;
      JsonFrame k;
      k.node = JsonGrammar::kAnyString;
      k.phase = kString;
      t.stack.push_back(k);
    } else {
      f.phase = kObjKey;
      f.typed.clear();
    }
    emit(std::move(t));
  }

  void key(JsonThread t, unsigned char c) {
    JsonFrame& f = t.stack.back();
    const auto& props = node(f).properties;
    for (size_t i = 0; i < props.size(); ++i) {
      if (f.used >> i & 1) continue;
      if (c == '"' && props[i].key == f.typed) {  // (a key's encoding never ends in an odd run of backslashes)
        JsonThread n = t;
        n.stack.back().phase = kObjColon;
        n.stack.back().count = int64_t(i);
        n.stack.back().typed.clear();
        return emit(std::move(n));
      }
    }
    const std::string next = f.typed + char(c);
    for (size_t i = 0; i < props.size(); ++i)
      if (!(f.used >> i & 1) && props[i].key.starts_with(next)) {
        f.typed = next;
        return emit(std::move(t));
      }
  }

  // Pushes a value of node `n` above the top frame.
  void push_value(JsonThread t, int32_t n) {
    JsonFrame v;
    v.node = n;
    v.phase = kValue;
    t.stack.push_back(v);
    emit(std::move(t));
  }

  void step(JsonThread t, unsigned char c) {
    if (t.stack.empty()) return;  // nothing follows the top-level value
    JsonFrame& f = t.stack.back();
    const bool ws = json_space(c);
    const bool gap = f.phase == kValue || (f.phase >= kObjOpen && f.phase <= kArrAfter && f.phase != kObjKey);
    if (gap && ws) return space(std::move(t));
    if (f.phase == kString) return string(std::move(t), c);
    if (f.phase == kNumber) return number(std::move(t), c);
    if (f.phase == kLiteral) return literal(std::move(t), c);
    t.spaces = 0;
    const JsonNode& n = node(f);
    switch (f.phase) {
      case kValue: return start_value(std::move(t), f.node, c);
      case kObjOpen:
      case kObjNext:
        if (c == '"') return open_key(std::move(t));
        if (c == '}' && f.phase == kObjOpen && required_done(f)) return pop(std::move(t));
        return;
      case kObjKey: return key(std::move(t), c);
      case kObjColon: {
        if (c != ':') return;
        const int32_t value = f.count < 0 ? JsonGrammar::kAnyValue : n.properties[size_t(f.count)].node;
        if (f.count >= 0) f.used |= uint64_t(1) << f.count;
        f.phase = kObjAfter;
        return push_value(std::move(t), value);
      }
      case kObjAfter:
        if (c == ',' && property_left(f)) {
          f.phase = kObjNext;
          return emit(std::move(t));
        }
        if (c == '}' && required_done(f)) return pop(std::move(t));
        return;
      case kArrOpen:
        if (c == ']') {
          if (n.min_items == 0) pop(std::move(t));
          return;
        }
        if (n.max_items == 0) return;
        f.phase = kArrAfter;
        f.count = 1;
        t.stack.push_back(JsonFrame{});
        t.stack.back().node = n.items;
        return start_value(std::move(t), n.items, c);
      case kArrAfter:
        if (c == ',' && f.count < n.max_items) {
          ++f.count;
          return push_value(std::move(t), n.items);
        }
        if (c == ']' && f.count >= n.min_items) return pop(std::move(t));
        return;
      default: ZAYA_ASSERT(false);
    }
  }
};

// The most threads a state keeps (anyOf alternatives not yet told apart); the
// rest are dropped, which only narrows what may follow.
constexpr size_t kMaxThreads = 64;

}  // namespace

JsonState json_start(const JsonGrammar& g) {
  JsonState s;
  JsonThread t;
  JsonFrame f;
  f.node = g.root;
  t.stack.push_back(f);
  s.threads.push_back(std::move(t));
  return s;
}

JsonState json_step(const JsonGrammar& g, const JsonState& state, unsigned char c) {
  JsonState next;
  Stepper st{g, next.threads};
  for (const JsonThread& t : state.threads) {
    st.step(t, c);
    if (next.threads.size() >= kMaxThreads) break;
  }
  if (next.threads.size() > kMaxThreads) next.threads.resize(kMaxThreads);
  return next;
}

bool json_complete(const JsonGrammar& g, const JsonState& state) {
  for (const JsonThread& t : state.threads) {
    if (t.stack.empty()) return true;
    if (t.stack.size() != 1) continue;
    const JsonFrame& f = t.stack.back();
    if (f.phase == kNumber && Stepper::number_complete(f)) return true;
    if (f.phase == kLiteral) {
      const auto& l = g.nodes[size_t(f.node)].literals;
      if (std::find(l.begin(), l.end(), f.typed) != l.end()) return true;
    }
  }
  return false;
}

int64_t json_string_room(const JsonGrammar& g, const JsonState& state) {
  if (state.threads.size() != 1 || state.threads[0].stack.empty()) return -1;
  const JsonFrame& f = state.threads[0].stack.back();
  if (f.phase != kString || f.sub != kPlain || f.utf8_left != 0) return -1;
  const int64_t max = g.nodes[size_t(f.node)].max_length;
  return max == std::numeric_limits<int64_t>::max() ? max : max - f.count;
}

std::string json_state_key(const JsonState& state) {
  std::string k;
  for (const JsonThread& t : state.threads) {
    k.append(reinterpret_cast<const char*>(&t.spaces), sizeof t.spaces);
    for (const JsonFrame& f : t.stack) {
      k.append(reinterpret_cast<const char*>(&f.node), sizeof f.node);
      k += char(f.phase);
      k += char(f.sub);
      k += char(f.utf8_left);
      k += char(f.utf8_lo);
      k += char(f.utf8_hi);
      k.append(reinterpret_cast<const char*>(&f.count), sizeof f.count);
      k.append(reinterpret_cast<const char*>(&f.used), sizeof f.used);
      k.append(std::to_string(f.typed.size()));
      k += ':';
      k += f.typed;
    }
    k += '|';
  }
  return k;
}

bool json_accepts(const JsonGrammar& g, const std::string& text) {
  JsonState s = json_start(g);
  for (unsigned char c : text) {
    s = json_step(g, s, c);
    if (s.threads.empty()) return false;
  }
  return json_complete(g, s);
}

}  // namespace zaya
