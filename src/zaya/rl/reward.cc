#include "zaya/rl/reward.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <regex>

#include "zaya/core/error.h"
#include "zaya/core/timer.h"

namespace zaya {

std::string normalize_answer(std::string_view text) {
  std::string out;
  bool space = false;
  for (char ch : text) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += char(std::tolower(static_cast<unsigned char>(ch)));
  }
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

std::optional<std::string> last_boxed(std::string_view text) {
  static constexpr std::string_view kOpen = "\\boxed{";
  std::optional<std::string> found;
  for (size_t at = text.find(kOpen); at != std::string_view::npos; at = text.find(kOpen, at + 1)) {
    const size_t start = at + kOpen.size();
    int depth = 1;
    size_t i = start;
    for (; i < text.size() && depth > 0; ++i) depth += text[i] == '{' ? 1 : text[i] == '}' ? -1 : 0;
    if (depth == 0) found = std::string(text.substr(start, i - 1 - start));
  }
  return found;
}

std::optional<double> last_number(std::string_view text) {
  static const std::regex number(R"([-+]?(\d[\d,]*)?\.?\d+([eE][-+]?\d+)?)");
  const std::string s(text);
  std::optional<double> found;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), number); it != std::sregex_iterator(); ++it) {
    std::string digits;
    const std::string m = it->str();
    for (size_t i = 0; i < m.size(); ++i)
      if (m[i] != ',') digits += m[i];
    char* end = nullptr;
    const double v = std::strtod(digits.c_str(), &end);
    if (end != nullptr && *end == '\0' && std::isfinite(v)) found = v;
  }
  return found;
}

std::string record_answer(const nlohmann::json& record, const std::string& field, const std::string& where) {
  const auto it = record.find(field);
  ZAYA_CHECK(it != record.end(), "{}: the record has no \"{}\" field, which the reward compares with (rl.answer_field)",
             where, field);
  if (it->is_string()) return it->get<std::string>();
  ZAYA_CHECK(it->is_number(), "{}: \"{}\" is {}; allowed: a string or a number (rl.answer_field)", where, field,
             it->dump());
  return it->dump();
}

namespace {

double verify(const RlConfig& c, const RewardItem& item, const std::regex* pattern) {
  const std::string answer = record_answer(*item.record, c.answer_field, item.where);
  switch (c.reward) {
    case RewardKind::kExact: return normalize_answer(item.completion) == normalize_answer(answer) ? 1.0 : 0.0;
    case RewardKind::kBoxed: {
      const std::optional<std::string> boxed = last_boxed(item.completion);
      return boxed && normalize_answer(*boxed) == normalize_answer(answer) ? 1.0 : 0.0;
    }
    case RewardKind::kRegex: {
      std::smatch last;
      bool any = false;
      for (auto it = std::sregex_iterator(item.completion.begin(), item.completion.end(), *pattern);
           it != std::sregex_iterator(); ++it) {
        last = *it;
        any = true;
      }
      if (!any) return 0.0;
      const std::string got = last.size() > 1 ? last[1].str() : last[0].str();
      return normalize_answer(got) == normalize_answer(answer) ? 1.0 : 0.0;
    }
    case RewardKind::kNumeric: {
      const std::optional<double> want = last_number(answer);
      ZAYA_CHECK(want.has_value(), "{}: \"{}\" = {} holds no number (rl.reward = \"numeric\")", item.where,
                 c.answer_field, answer);
      const std::optional<double> got = last_number(item.completion);
      return got && std::fabs(*got - *want) <= c.tolerance ? 1.0 : 0.0;
    }
    case RewardKind::kCommand: break;
  }
  fail("internal error: no built-in verifier for this rl.reward");
}

std::vector<double> command_scores(const RlConfig& c, const std::vector<RewardItem>& items) {
  std::string input;
  for (const RewardItem& item : items) {
    const nlohmann::json line = {
        {"prompt", *item.prompt_text}, {"completion", item.completion}, {"record", *item.record}};
    input += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  const std::string what = fmt::format("the reward command (rl.command = '{}')", c.command);
  const std::string out = run_reward_command(c.command, input, c.timeout, what);
  std::vector<double> scores;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(pos, end - pos);
    pos = end + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    const size_t k = scores.size();
    ZAYA_CHECK(k < items.size(), "{}: printed more than {} lines (one score per completion)", what, items.size());
    char* stop = nullptr;
    const double v = std::strtod(line.c_str(), &stop);
    ZAYA_CHECK(!line.empty() && stop != nullptr && *stop == '\0' && std::isfinite(v),
               "{}: output line {} (the score of {}) is '{}'; allowed: a finite number", what, k + 1, items[k].where,
               line);
    scores.push_back(v);
  }
  ZAYA_CHECK(scores.size() == items.size(), "{}: printed {} scores for {} completions; the first without one: {}", what,
             scores.size(), items.size(), items[std::min(scores.size(), items.size() - 1)].where);
  return scores;
}

}  // namespace

std::vector<double> score_completions(const RlConfig& c, const std::vector<RewardItem>& items) {
  if (items.empty()) return {};
  if (c.reward == RewardKind::kCommand) return command_scores(c, items);
  std::optional<std::regex> pattern;
  if (c.reward == RewardKind::kRegex) {
    try {
      pattern.emplace(c.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      fail("rl.pattern = '{}' is not a valid regular expression (ECMAScript): {}", c.pattern, e.what());
    }
  }
  std::vector<double> scores;
  scores.reserve(items.size());
  for (const RewardItem& item : items) scores.push_back(verify(c, item, pattern ? &*pattern : nullptr));
  return scores;
}

std::string run_reward_command(const std::string& command, const std::string& input, double timeout,
                               const std::string& what) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  ZAYA_CHECK(pipe(in_pipe) == 0 && pipe(out_pipe) == 0 && pipe(err_pipe) == 0, "{}: cannot create pipes: {}", what,
             std::strerror(errno));
  // posix_spawn, not fork: glibc starts the child with clone(CLONE_VM | CLONE_VFORK), so the parent's pages
  // are neither copied nor marked copy-on-write. After a fork every page of the trainer's arena, the KV pool
  // and the workspaces took a write fault at its next write (about 15% of a rollout's time in the
  // walk-through, docs/rl.md "Speed"). The child's descriptors are set as the fork's were; SIGPIPE, which
  // this function ignores below, is the default again in the child.
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ZAYA_CHECK(posix_spawn_file_actions_init(&actions) == 0 && posix_spawnattr_init(&attr) == 0,
             "{}: cannot start: out of memory", what);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
    if (fd > 2) posix_spawn_file_actions_addclose(&actions, fd);  // 0-2 (a parent without stdio) are dup2 targets
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  const int started = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (started != 0)
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
  ZAYA_CHECK(started == 0, "{}: cannot start /bin/sh: {}", what, std::strerror(started));
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Write stdin while reading stdout and stderr: a program that answers line by line never blocks us.
  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  int to_child = in_pipe[1];
  size_t written = 0;
  if (input.empty()) {
    close(to_child);
    to_child = -1;
  }
  std::string out, err;
  int open_outputs = 2;
  const double deadline = now_seconds() + timeout;
  bool timed_out = false;
  signal(SIGPIPE, SIG_IGN);  // a program that exits without reading its input
  while (open_outputs > 0 || to_child >= 0) {
    const double left = deadline - now_seconds();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[3] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {to_child, POLLOUT, 0}};
    const int n = poll(fds, 3, int(std::min(left * 1000.0 + 1, 1e9)));
    if (n < 0 && errno == EINTR) continue;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t got = read(fds[k].fd, buf, sizeof buf);
      if (got > 0) {
        (k == 0 ? out : err).append(buf, size_t(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[k].fd);
        (k == 0 ? out_pipe[0] : err_pipe[0]) = -1;
        --open_outputs;
      }
    }
    if (to_child >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t put = write(to_child, input.data() + written, input.size() - written);
      if (put > 0) written += size_t(put);
      if ((put < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
        close(to_child);
        to_child = -1;
      }
    }
  }
  if (to_child >= 0) close(to_child);
  for (int fd : {out_pipe[0], err_pipe[0]})
    if (fd >= 0) close(fd);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ZAYA_CHECK(!timed_out, "{}: ran past its timeout of {} s (rl.timeout) and was killed", what, timeout);
  const std::string tail = err.size() > 400 ? "..." + err.substr(err.size() - 400) : err;
  ZAYA_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "{}: {}{}", what,
             WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                               : fmt::format("was killed by signal {}", WTERMSIG(status)),
             tail.empty() ? "" : fmt::format("; its stderr: {}", tail));
  return out;
}

}  // namespace zaya
