#pragma once
// Rewards of RL completions (docs/rl.md, "Rewards"): the built-in verifiers
// compare a completion with the answer its prompt's record holds
// (rl.answer_field), and an external program scores a whole batch.
//
//   exact    normalize(completion) == normalize(answer)
//   boxed    the content of the completion's last \boxed{...} (braces
//            balanced), normalised, == normalize(answer); none: 0
//   regex    the last match of rl.pattern in the completion (its first
//            capture group when it has one), normalised, == normalize(answer);
//            no match: 0
//   numeric  the last number in the completion within rl.tolerance of the
//            answer (a number, or a string holding one); none: 0
//   command  /bin/sh -c rl.command gets one JSON object per completion on
//            stdin, {"prompt": TEXT, "completion": TEXT, "record": {...}},
//            and prints one score (a finite number) per line, in order,
//            within rl.timeout seconds
//
// normalize: surrounding whitespace trimmed, runs of whitespace made one
// space, ASCII lower case, one trailing '.' dropped. A built-in verifier
// scores 1 or 0. A record without the answer field, a command that fails,
// times out, or prints a line that is not a number, or the wrong number of
// lines, is an error naming the record (FILE:LINE), never a silent zero.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zaya/train/rl_config.h"

namespace zaya {

std::string normalize_answer(std::string_view text);
// The content of the last \boxed{...} with balanced braces, or none.
std::optional<std::string> last_boxed(std::string_view text);
// The last number (optional sign, digits, optional fraction and exponent; a
// thousands separator ',' between digits is dropped), or none.
std::optional<double> last_number(std::string_view text);

// What one completion is scored against.
struct RewardItem {
  const nlohmann::json* record = nullptr;  // the prompt's record as read
  const std::string* prompt_text = nullptr;
  std::string completion;  // the generated text, up to the first stop string
  std::string where;       // "FILE:LINE" of the record (with the sample: "FILE:LINE (sample 3)")
};

// The answer a built-in verifier compares with: the record's `field` (a
// string, or a number as JSON writes it); fails naming `where` and the field.
std::string record_answer(const nlohmann::json& record, const std::string& field, const std::string& where);

// One score per item (see the file comment).
std::vector<double> score_completions(const RlConfig& config, const std::vector<RewardItem>& items);

// Runs `/bin/sh -c command` with `input` on its stdin and returns its stdout;
// fails (naming `what`) when it cannot start, exits non-zero or by a signal
// (with the end of its stderr), or runs past `timeout` seconds (it is killed).
std::string run_reward_command(const std::string& command, const std::string& input, double timeout,
                               const std::string& what);

}  // namespace zaya
