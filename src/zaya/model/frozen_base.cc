#include "zaya/model/frozen_base.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "zaya/core/error.h"

namespace zaya {

bool bf16_only_role(TensorRole role) {
  switch (role) {
    case TensorRole::kEmbedding:
    case TensorRole::kLmHead:
    case TensorRole::kAttnQ:
    case TensorRole::kAttnK:
    case TensorRole::kAttnVCurrent:
    case TensorRole::kAttnVDelayed:
    case TensorRole::kAttnOut:
    case TensorRole::kExpertFc1:
    case TensorRole::kExpertFc2: return true;
    default: return false;
  }
}

bool quantized_base_role(TensorRole role) { return role == TensorRole::kExpertFc1 || role == TensorRole::kExpertFc2; }

FrozenF32Space::FrozenF32Space(const ParamTable& table, bool bf16_only, bool quantized_experts) {
  const int64_t page = int64_t(sysconf(_SC_PAGESIZE));
  bytes_ = std::max<int64_t>((table.total_floats() * int64_t(sizeof(float)) + page - 1) / page * page, page);
  // Reserved, not committed: no memory until a page is made accessible and touched.
  void* p = mmap(nullptr, size_t(bytes_), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ZAYA_CHECK(p != MAP_FAILED, "cannot reserve {} bytes of address space for the frozen base: {}", bytes_,
             std::strerror(errno));
  data_ = static_cast<float*>(p);
  auto* base = static_cast<char*>(p);
  int64_t open_end = 0;  // end of the last page range made accessible (ranges come in offset order)
  for (const ParamEntry& e : table.entries()) {
    if ((bf16_only && bf16_only_role(e.role)) || (quantized_experts && quantized_base_role(e.role)) || e.numel == 0)
      continue;
    int64_t begin = e.offset * int64_t(sizeof(float)) / page * page;
    const int64_t end = ((e.offset + e.numel) * int64_t(sizeof(float)) + page - 1) / page * page;
    begin = std::max(begin, open_end);
    if (begin >= end) continue;
    ZAYA_CHECK(mprotect(base + begin, size_t(end - begin), PROT_READ | PROT_WRITE) == 0,
               "cannot map the float32 tensor '{}' of the frozen base: {}", e.name, std::strerror(errno));
    backed_bytes_ += end - begin;
    open_end = end;
  }
}

FrozenF32Space::~FrozenF32Space() {
  if (data_ != nullptr) munmap(data_, size_t(bytes_));
}

}  // namespace zaya
