#include "zaya/data/dataset_writer.h"

#include "zaya/core/error.h"
#include "zaya/data/megatron_writer.h"
#include "zaya/data/shard_writer.h"

namespace zaya {

DatasetFormat parse_dataset_format(const std::string& name) {
  if (name == "zaya") return DatasetFormat::kZaya;
  if (name == "megatron") return DatasetFormat::kMegatron;
  fail("dataset format '{}' is not known; expected 'zaya' or 'megatron'", name);
}

const char* dataset_format_name(DatasetFormat format) {
  return format == DatasetFormat::kMegatron ? "megatron" : "zaya";
}

std::unique_ptr<DatasetWriter> make_dataset_writer(DatasetFormat format, const std::string& prefix,
                                                   uint32_t vocab_size) {
  if (format == DatasetFormat::kMegatron) return std::make_unique<MegatronWriter>(prefix, vocab_size);
  return std::make_unique<ShardWriter>(prefix, vocab_size);
}

}  // namespace zaya
