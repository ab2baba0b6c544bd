#include "zaya/train/stop_request.h"

#include <csignal>
#include <filesystem>

#include "zaya/dist/comm.h"

namespace zaya {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int) { g_stop_signal = 1; }

}  // namespace

void StopRequest::install() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool StopRequest::requested() {
  int32_t flag = g_stop_signal ? 1 : 0;
  const std::filesystem::path control = std::filesystem::path(out_dir_) / "control" / "stop";
  if (mesh_.rank() == 0 && std::filesystem::exists(control)) {
    flag = 1;
    std::error_code ec;
    std::filesystem::remove(control, ec);
  }
  if (mesh_.world_size() > 1) mesh_.world().all_reduce(&flag, &flag, 1, DType::kI32, ReduceOp::kMax);
  return flag != 0;
}

}  // namespace zaya
