#include "zaya/dist/collective.h"

#include <climits>
#include <cstdint>
#include <exception>
#include <vector>

#include <fmt/format.h>

namespace zaya {

void run_collectively(Comm& comm, const std::string& what, const std::function<void()>& fn) {
  std::string message;
  try {
    fn();
  } catch (const std::exception& e) {
    message = e.what();
    if (message.empty()) message = "unknown error";
  }
  int32_t failed = message.empty() ? INT32_MAX : comm.rank(), first = INT32_MAX;
  comm.all_reduce(&failed, &first, 1, DType::kI32, ReduceOp::kMin);
  if (first == INT32_MAX) return;
  int64_t length = comm.rank() == first ? int64_t(message.size()) : 0;
  comm.broadcast(&length, 1, DType::kI64, first);
  std::string text(size_t(length), '\0');
  if (comm.rank() == first) text = message;
  comm.broadcast(text.data(), size_t(length), DType::kU8, first);
  if (comm.size() == 1) throw CollectiveError(text);
  throw CollectiveError(fmt::format("{} failed on rank {} of {}: {}", what, first, comm.size(), text));
}

void check_same_on_all_ranks(Comm& comm, const std::string& text, const std::string& what) {
  // FNV-1a of the text on every rank, gathered everywhere.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  std::vector<int64_t> all(comm.size());
  int64_t mine = int64_t(h);
  comm.all_gather(&mine, all.data(), 1, DType::kI64);
  std::string differing;
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  if (!differing.empty())
    throw CollectiveError(
        fmt::format("{} differs between ranks: rank(s) {} do not match rank 0; start every rank "
                    "with the same files and options",
                    what, differing));
}

}  // namespace zaya
