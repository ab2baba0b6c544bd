#include "zaya/launch/supervisor.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "zaya/ckpt/reader.h"
#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/io/append_file.h"
#include "zaya/io/heartbeat.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

volatile sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) { g_signal = sig; }

double wall_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// An event as a line for people (the JSON record goes to incidents.jsonl).
std::string describe_event(const std::string& event, int attempt, const nlohmann::json& x) {
  auto num = [&](const char* key) { return x.contains(key) ? x[key].get<double>() : 0.0; };
  auto text = [&](const char* key) { return x.contains(key) ? x[key].get<std::string>() : std::string(); };
  if (event == "start")
    return fmt::format("attempt {}: starting {}{}", attempt, text("command"),
                       x.value("resume", false) ? " (resuming from the newest checkpoint)" : "");
  if (event == "recovered")
    return fmt::format("attempt {}: training again at step {}, {:.1f} s after the {}", attempt,
                       x.value("step", int64_t(0)), num("seconds"), text("after"));
  if (event == "finished") return fmt::format("attempt {}: finished in {:.1f} s", attempt, num("seconds"));
  if (event == "stop-requested")
    return fmt::format("signal {}: asking the job to save a checkpoint and stop", x.value("signal", 0));
  if (event == "stopped")
    return fmt::format("attempt {}: stopped{}", attempt, x.contains("status") ? " (" + text("status") + ")" : "");
  if (event == "preempted")
    return fmt::format("attempt {}: the job stopped for a preemption ({}); restarting", attempt, text("status"));
  if (event == "restart")
    return fmt::format("restarting in {:.1f} s (failure {} of the budget)", num("in_seconds"), x.value("failures", 0));
  if (event == "gave-up") return fmt::format("giving up: {}", text("reason"));
  std::string line = fmt::format("attempt {}: {}", attempt, event);  // crash, hang
  if (x.contains("status")) line += " (" + text("status") + ")";
  if (x.contains("detail")) line += ": " + text("detail");
  if (x.contains("suspected_rank")) line += fmt::format("; suspected rank {}", x["suspected_rank"].get<int>());
  return line;
}

class IncidentLog {
 public:
  explicit IncidentLog(std::string path) : path_(std::move(path)) {}
  void write(const std::string& event, int attempt, const nlohmann::json& extra = {}) {
    nlohmann::json j = {{"time", wall_now()}, {"source", "supervisor"}, {"event", event}, {"attempt", attempt}};
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
    append_line(path_, j.dump());
    fmt::print(stderr, "zaya launch: {}\n", describe_event(event, attempt, extra));
  }

 private:
  std::string path_;
};

// Runs argv in a new process group; returns the child's pid.
pid_t spawn(const std::vector<std::string>& argv) {
  const pid_t pid = ::fork();
  ZAYA_CHECK(pid >= 0, "cannot fork: {}", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "zaya launch: cannot run %s: %s\n", args[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

// SIGTERM to the whole group, SIGKILL after a grace period; reaps the child.
int stop_group(pid_t pid, double grace_seconds) {
  ::kill(-pid, SIGTERM);
  const double deadline = wall_now() + grace_seconds;
  int status = 0;
  while (wall_now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return status;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "unknown status";
}

// Per-rank heartbeat bookkeeping: the last record seen and when it changed.
struct RankWatch {
  HeartbeatRecord last;
  double changed_at = 0;  // wall time of the last change we saw
  bool seen = false;
};

}  // namespace

int supervise(const SupervisorOptions& o) {
  ZAYA_CHECK_USAGE(o.ranks >= 1, "zaya launch: -n {} is invalid; allowed: >= 1", o.ranks);
  const std::string hb_dir = (fs::path(o.out_dir) / "heartbeat").string();
  const std::string control = (fs::path(o.out_dir) / "control").string();
  std::error_code ec;
  fs::create_directories(control, ec);
  fs::create_directories(hb_dir, ec);
  ZAYA_CHECK(!ec, "cannot create {}: {}", control, ec.message());
  IncidentLog log((fs::path(o.out_dir) / "incidents.jsonl").string());
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  int failures = 0, preemptions = 0;
  double max_step_seconds = 0;  // learned across attempts
  double failed_at = -1;        // when the last failure was detected (for recovery times)
  std::string failed_kind;
  const bool user_resume = std::find(o.train_args.begin(), o.train_args.end(), "--resume") != o.train_args.end();
  for (int attempt = 1;; ++attempt) {
    // The command of this attempt.
    std::vector<std::string> argv;
    if (o.ranks > 1) {
      argv = {o.mpirun, "-np", std::to_string(o.ranks)};
      argv.insert(argv.end(), o.mpirun_args.begin(), o.mpirun_args.end());
    }
    argv.push_back(o.zaya_binary);
    argv.insert(argv.end(), o.train_args.begin(), o.train_args.end());
    argv.push_back("--heartbeat-dir");
    argv.push_back(hb_dir);
    const bool have_checkpoint = !list_checkpoints(o.checkpoint_dir).empty();
    if (attempt > 1 && have_checkpoint && !user_resume) argv.push_back("--resume");
    if (attempt == 1 && !o.inject.empty()) {
      argv.push_back("--inject");
      argv.push_back(o.inject);
    }
    for (int r = 0; r < o.ranks; ++r) fs::remove(heartbeat_path(hb_dir, r), ec);
    fs::remove(fs::path(control) / "stop", ec);
    std::string cmd;
    for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    log.write("start", attempt, {{"command", cmd}, {"resume", attempt > 1 && have_checkpoint}});
    const double started = wall_now();
    const pid_t pid = spawn(argv);
    std::vector<RankWatch> watch(o.ranks);
    int status = 0;
    std::string hang;
    bool recovered_logged = failed_at < 0;
    int64_t first_step = -1;
    bool stop_sent = false;
    for (;;) {
      if (::waitpid(pid, &status, WNOHANG) == pid) break;
      if (g_signal != 0 && !stop_sent) {
        // A stop request for the job: checkpoint at the next step boundary and exit 75.
        std::FILE* f = std::fopen((fs::path(control) / "stop").c_str(), "w");
        if (f) std::fclose(f);
        log.write("stop-requested", attempt, {{"signal", int(g_signal)}});
        stop_sent = true;
      }
      const double now = wall_now();
      for (int r = 0; r < o.ranks; ++r) {
        HeartbeatRecord rec;
        RankWatch& w = watch[r];
        if (read_heartbeat(hb_dir, r, rec)) {
          if (!w.seen || rec.phase != w.last.phase || rec.step != w.last.step) {
            if (w.seen && w.last.phase == HeartbeatPhase::kStep && rec.phase != HeartbeatPhase::kSetup)
              max_step_seconds = std::max(max_step_seconds, now - w.changed_at);
            w.last = rec;
            w.changed_at = now;
            w.seen = true;
            if (rec.phase == HeartbeatPhase::kStep && first_step < 0) first_step = rec.step;
            if (!recovered_logged && rec.phase == HeartbeatPhase::kStep && rec.step > first_step) {
              log.write("recovered", attempt,
                        {{"after", failed_kind}, {"seconds", now - failed_at}, {"step", rec.step - 1}});
              recovered_logged = true;
            }
          }
        }
        // How long may this rank stay in its current phase?
        const HeartbeatPhase phase = w.seen ? w.last.phase : HeartbeatPhase::kSetup;
        double limit = o.setup_timeout;
        switch (phase) {
          case HeartbeatPhase::kStep:
            limit = std::max(o.min_step_timeout, o.step_timeout_factor * max_step_seconds);
            break;
          case HeartbeatPhase::kCheckpoint:
          case HeartbeatPhase::kFinishing: limit = o.checkpoint_timeout; break;
          case HeartbeatPhase::kEval: limit = o.eval_timeout; break;
          case HeartbeatPhase::kSetup: break;
        }
        const double since = w.seen ? w.changed_at : started;
        if (now - since > limit && hang.empty())
          hang = fmt::format("rank {} made no progress for {:.1f} s in phase '{}' at step {} (limit {:.1f} s)", r,
                             now - since, enum_name<HeartbeatPhase>(kHeartbeatPhaseNames, phase),
                             w.seen ? w.last.step : 0, limit);
      }
      if (!hang.empty()) {
        status = stop_group(pid, 5.0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double now = wall_now();
    if (hang.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      log.write("finished", attempt, {{"seconds", now - started}});
      return 0;
    }
    if (stop_sent) {
      log.write("stopped", attempt, {{"status", describe(status)}});
      return kExitPreempted;
    }
    if (hang.empty() && WIFEXITED(status) && WEXITSTATUS(status) == kExitPreempted) {
      log.write("preempted", attempt, {{"status", describe(status)}, {"seconds", now - started}});
      failed_at = now;
      failed_kind = "preemption";
      if (++preemptions > o.max_preemptions) {
        log.write("gave-up", attempt, {{"reason", "too many preemptions"}});
        return 1;
      }
      continue;  // resume at once
    }
    // A failure: which rank, if we can tell (the one whose heartbeat went quiet first).
    int suspect = -1;
    double oldest = 1e300;
    for (int r = 0; r < o.ranks; ++r)
      if (watch[r].seen && watch[r].changed_at < oldest) {
        oldest = watch[r].changed_at;
        suspect = r;
      }
    failed_kind = hang.empty() ? "crash" : "hang";
    nlohmann::json what = {{"status", describe(status)}, {"seconds", now - started}};
    if (!hang.empty()) what["detail"] = hang;
    if (suspect >= 0) what["suspected_rank"] = suspect;
    log.write(failed_kind, attempt, what);
    failed_at = now;
    if (++failures > o.max_restarts) {
      log.write("gave-up", attempt,
                {{"reason", fmt::format("{} failures, restart budget {}", failures, o.max_restarts)}});
      return 1;
    }
    const double delay = std::min(o.backoff_max_seconds, o.backoff_seconds * std::pow(2.0, failures - 1));
    log.write("restart", attempt, {{"in_seconds", delay}, {"failures", failures}});
    const double until = wall_now() + delay;
    while (wall_now() < until && g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (g_signal != 0) {
      log.write("stopped", attempt, {{"signal", int(g_signal)}});
      return kExitPreempted;
    }
  }
}

}  // namespace zaya
