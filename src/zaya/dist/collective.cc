#include "zaya/dist/collective.h"

#include <cstdint>
#include <exception>
#include <vector>

#include <fmt/format.h>

namespace zaya {
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

// "on rank 2 of 4", "on ranks 1, 3 of 4", "on all 4 ranks".
std::string failed_ranks(const std::vector<int>& failed, int size, bool alike) {
  if (int(failed.size()) == size && alike) return fmt::format("on all {} ranks", size);
  if (failed.size() == 1) return fmt::format("on rank {} of {}", failed[0], size);
  if (alike) return fmt::format("on ranks {} of {}", fmt::join(failed, ", "), size);
  return fmt::format("on ranks {} of {} (rank {}'s message; the others differ)", fmt::join(failed, ", "), size,
                     failed[0]);
}

}  // namespace

void run_collectively(Comm& comm, const std::string& what, const std::function<void()>& fn) {
  std::string message;
  bool usage = false;
  try {
    fn();
  } catch (const std::exception& e) {
    message = e.what();
    if (message.empty()) message = "unknown error";
    usage = dynamic_cast<const UsageError*>(&e) != nullptr;
  }
  // What every rank saw: whether it failed, whether the command line was at fault, the hash of its message.
  const int64_t mine[3] = {message.empty() ? 0 : 1, usage ? 1 : 0, int64_t(fnv1a(message))};
  std::vector<int64_t> all(3 * size_t(comm.size()));
  comm.all_gather(mine, all.data(), 3, DType::kI64);
  std::vector<int> failed;
  for (int r = 0; r < comm.size(); ++r)
    if (all[3 * r] != 0) failed.push_back(r);
  if (failed.empty()) return;
  const int first = failed[0];
  bool alike = true;
  for (int r : failed) alike = alike && all[3 * r + 2] == all[3 * first + 2];
  int64_t length = comm.rank() == first ? int64_t(message.size()) : 0;
  comm.broadcast(&length, 1, DType::kI64, first);
  std::string text(size_t(length), '\0');
  if (comm.rank() == first) text = message;
  comm.broadcast(text.data(), size_t(length), DType::kU8, first);
  const bool usage_error = all[3 * first + 1] != 0;
  if (comm.size() == 1) throw CollectiveError(text, usage_error);
  throw CollectiveError(fmt::format("{} failed {}: {}", what, failed_ranks(failed, comm.size(), alike), text),
                        usage_error, comm.rank() == 0);
}

void check_same_on_all_ranks(Comm& comm, const std::string& text, const std::string& what) {
  std::vector<int64_t> all(comm.size());
  const int64_t mine = int64_t(fnv1a(text));
  comm.all_gather(&mine, all.data(), 1, DType::kI64);
  std::string differing;
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  if (!differing.empty())
    throw CollectiveError(fmt::format("{} differs between ranks: rank(s) {} do not match rank 0; start every rank "
                                      "with the same files and options",
                                      what, differing),
                          false, comm.rank() == 0);
}

}  // namespace zaya
