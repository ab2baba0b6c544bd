#pragma once
// Splitting the ranks of `zaya bench comm` into groups that run the benchmark
// in parallel, as nccl-tests' NCCL_TESTS_SPLIT does: the color of world rank r
// is `r OP value`, and ranks of one color form a group (ordered by world rank).
//
//   "MOD 8" / "AND 0x7"  one rank per node in each group (8 ranks per node):
//                        pure inter-node traffic
//   "DIV 8"              one group per node: pure intra-node traffic
//   "OR v", "XOR v"      as the bit operations; "" or "NONE": one group
//
// The operation is case-insensitive; the space is optional ("MOD8"); the value
// is decimal or 0x-prefixed hexadecimal.

#include <cstdint>
#include <string>

namespace zaya {

struct SplitSpec {
  enum class Op { kNone, kAnd, kOr, kXor, kMod, kDiv };
  Op op = Op::kNone;
  uint64_t value = 0;
  std::string text;  // as given, for reports
};

SplitSpec parse_split(const std::string& text);
int split_color(const SplitSpec& spec, int world_rank);

}  // namespace zaya
