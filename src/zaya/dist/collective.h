#pragma once
// Agreement helpers for multi-process runs, so that a problem on one rank
// becomes the same clear error on every rank instead of a hang in the next
// collective (issue [dist] "bad situations"). Every rank throws, one prints:
// an error that all ranks saw alike appears once, not once per rank.

#include <functional>
#include <string>

#include "zaya/core/error.h"
#include "zaya/dist/comm.h"

namespace zaya {

// Thrown on every rank when one of them failed: all ranks stop together.
// `usage`: the failure was a UsageError (the command line's fault: exit 2).
// `print_here`: this rank reports the message (rank 0 of the world, so an
// error every rank throws is printed once); the others exit quietly.
class CollectiveError : public Error {
 public:
  explicit CollectiveError(const std::string& message, bool usage = false, bool print_here = true)
      : Error(message), usage_(usage), print_here_(print_here) {}
  bool usage() const { return usage_; }
  bool print_here() const { return print_here_; }

 private:
  bool usage_, print_here_;
};

// Runs fn() on every rank; if it throws on any rank, every rank throws a
// CollectiveError with the first failing rank's message, naming the ranks that
// failed ("on rank 2 of 4", "on all 4 ranks"; nothing on a world of one), and
// reported by rank 0 alone.
void run_collectively(Comm& comm, const std::string& what, const std::function<void()>& fn);

// Fails on every rank (CollectiveError, reported by rank 0) unless `text` is identical on all ranks.
void check_same_on_all_ranks(Comm& comm, const std::string& text, const std::string& what);

}  // namespace zaya
