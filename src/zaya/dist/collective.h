#pragma once
// Agreement helpers for multi-process runs, so that a problem on one rank
// becomes the same clear error on every rank instead of a hang in the next
// collective (issue [dist] "bad situations").

#include <functional>
#include <string>

#include "zaya/core/error.h"
#include "zaya/dist/comm.h"

namespace zaya {

// Thrown on every rank when one of them failed: all ranks stop together.
class CollectiveError : public Error {
 public:
  explicit CollectiveError(const std::string& message) : Error(message) {}
};

// Runs fn() on every rank; if it throws on any rank, every rank throws a
// CollectiveError with the first failing rank's message.
void run_collectively(Comm& comm, const std::string& what, const std::function<void()>& fn);

// Fails on every rank (CollectiveError) unless `text` is identical on all ranks.
void check_same_on_all_ranks(Comm& comm, const std::string& text, const std::string& what);

}  // namespace zaya
