#pragma once
// `zaya bench io`: the storage a training run leans on.
//
//   checkpoint write  `files` files of `file_bytes` each, written at once by
//                     one thread per file in `block_bytes` writes, then fsync
//                     (timed to the end of the fsync: what a checkpoint commit waits for)
//   checkpoint read   the same files read back sequentially after their pages
//                     were dropped from the page cache (posix_fadvise DONTNEED)
//   page IOPS         random single-page reads of the dataset file, distinct
//                     pages, `io_threads` readers at once, cold cache
//   sample reads      training windows as the sampler draws them (seq + 1
//                     tokens at a multiple of seq, uniformly at random) read
//                     through mmap as ShardReader reads a shard, cold cache:
//                       random:    MADV_RANDOM, so each page fault is one I/O;
//                                  the scatter factor sigma is the page faults per
//                                  sample over the ideal s b / P (io_model.h)
//                       readahead: the kernel default (what training sees); the
//                                  bytes fetched per useful byte (read amplification)
//
// Cache eviction is checked with mincore(); where the file system ignores it
// (some network file systems) the report says so instead of quoting cache speed.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "zaya/bench/io_model.h"
#include "zaya/bench/stats.h"

namespace zaya {

struct IoBenchOptions {
  std::string dir = ".";
  uint64_t file_bytes = uint64_t(1) << 30;
  int files = 1;
  uint64_t block_bytes = uint64_t(4) << 20;
  bool direct = false;  // O_DIRECT for the checkpoint files and page reads
  bool keep = false;    // keep the written files
  std::string dataset;  // token shard prefix (PREFIX.bin) or a file; empty: the first checkpoint file
  int64_t page_reads = 20000;
  int io_threads = 1;
  int64_t samples = 1000;
  int64_t seq_len = 4096;   // tokens per training sequence (s)
  int bytes_per_token = 4;  // b (uint32 token shards)
  // The model's step (io_model.h).
  double batch = 4096;        // G
  double step_seconds = 2.5;  // t
  double iops = 0;            // I_max; 0: the measured page IOPS
  uint64_t seed = 1;
};

struct IoPhase {
  bool ran = false;
  double bytes = 0, seconds = 0, gbps = 0;
  double sync_seconds = 0;          // write: the fsync share
  double resident_after_evict = 0;  // fraction of pages still cached when the cold read began
};

struct IoRandomPages {
  bool ran = false;
  int64_t reads = 0;
  double seconds = 0, iops = 0;
  SampleStats latency_us;
  double resident_after_evict = 0;
};

struct IoSamples {
  bool ran = false;
  int64_t samples = 0;
  uint64_t window_bytes = 0;
  double ideal_pages = 0;         // s b / P per sample
  double pages_touched = 0;       // per sample, from the offsets
  double faults_random = 0;       // major faults per sample, MADV_RANDOM
  double sigma = 0;               // faults_random / ideal_pages
  double extra_faults = 0;        // m = faults_random - ideal_pages
  double seconds_random = 0;      // per sample
  double read_amplification = 0;  // readahead pass: bytes read from storage / useful bytes (0: unknown)
  double seconds_readahead = 0;   // per sample
  double resident_after_evict = 0;
};

struct IoBenchResult {
  std::string dataset_path;
  uint64_t dataset_bytes = 0;
  long page_size = 4096;
  IoPhase write, read;
  IoRandomPages pages;
  IoSamples samples;
  StorageModelInput model_input;
  StorageModel model;
};

IoBenchResult run_io_bench(const IoBenchOptions& options);
nlohmann::json io_bench_json(const IoBenchOptions& options, const IoBenchResult& result);

}  // namespace zaya
