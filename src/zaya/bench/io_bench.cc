#include "zaya/bench/io_bench.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <unordered_set>

#include "zaya/bench/machine_info.h"
#include "zaya/bench/page_cache.h"
#include "zaya/core/arena.h"
#include "zaya/core/error.h"
#include "zaya/core/timer.h"

namespace zaya {
namespace {

[[noreturn]] void sys_fail(const std::string& path, const char* what) {
  fail("{}: {} failed: {}", path, what, std::strerror(errno));
}

// An fd closed on scope exit.
struct Fd {
  int fd = -1;
  std::string path;
  Fd(const std::string& p, int flags, mode_t mode = 0644) : path(p) {
    fd = ::open(p.c_str(), flags | O_CLOEXEC, mode);
    if (fd < 0) {
      if (errno == EINVAL && (flags & O_DIRECT))
        fail("{}: the file system does not support O_DIRECT; run without --direct", p);
      sys_fail(p, "open");
    }
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

IoPhase write_files(const std::vector<std::string>& paths, const IoBenchOptions& o) {
  IoPhase ph;
  ph.ran = true;
  std::vector<double> done(paths.size()), synced(paths.size());
  std::vector<std::string> errors(paths.size());
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  double start = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        auto buf = aligned_alloc_array<uint8_t>(size_t(o.block_bytes) + 4096);
        uint8_t* b = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.get()) + 4095) & ~uintptr_t(4095));
        std::mt19937_64 rng(o.seed * 7919 + i);
        for (size_t j = 0; j + 8 <= size_t(o.block_bytes); j += 8) {
          const uint64_t v = rng();
          std::memcpy(b + j, &v, 8);  // incompressible data: no file system or device shortcut
        }
        Fd f(paths[i], O_WRONLY | O_CREAT | O_TRUNC | (o.direct ? O_DIRECT : 0));
        while (!go.load()) std::this_thread::yield();
        for (uint64_t off = 0; off < o.file_bytes;) {
          const size_t n = size_t(std::min<uint64_t>(o.block_bytes, o.file_bytes - off));
          const ssize_t w = ::pwrite(f.fd, b, n, off_t(off));
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) sys_fail(paths[i], "write");
          off += uint64_t(w);
        }
        done[i] = now_seconds();
        if (::fsync(f.fd) != 0) sys_fail(paths[i], "fsync");
        synced[i] = now_seconds();
      } catch (const Error& e) {
        errors[i] = e.what();
        synced[i] = done[i] = now_seconds();
      }
    });
  }
  start = now_seconds();
  go = true;
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) ZAYA_CHECK(e.empty(), "{}", e);
  const double end_write = *std::max_element(done.begin(), done.end());
  const double end = *std::max_element(synced.begin(), synced.end());
  ph.bytes = double(o.file_bytes) * double(paths.size());
  ph.seconds = end - start;
  ph.sync_seconds = end - end_write;
  ph.gbps = ph.bytes / ph.seconds / 1e9;
  return ph;
}

IoPhase read_files(const std::vector<std::string>& paths, const IoBenchOptions& o) {
  IoPhase ph;
  ph.ran = true;
  double resident = 0;
  for (const std::string& p : paths) {
    evict(p);
    resident += resident_fraction(p) / double(paths.size());
  }
  ph.resident_after_evict = resident;
  std::vector<std::string> errors(paths.size());
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < paths.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        auto buf = aligned_alloc_array<uint8_t>(size_t(o.block_bytes) + 4096);
        uint8_t* b = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.get()) + 4095) & ~uintptr_t(4095));
        Fd f(paths[i], O_RDONLY | (o.direct ? O_DIRECT : 0));
        if (!o.direct) ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        while (!go.load()) std::this_thread::yield();
        for (uint64_t off = 0; off < o.file_bytes;) {
          const ssize_t r = ::pread(f.fd, b, size_t(std::min<uint64_t>(o.block_bytes, o.file_bytes - off)), off_t(off));
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0) sys_fail(paths[i], "read");
          off += uint64_t(r);
        }
      } catch (const Error& e) {
        errors[i] = e.what();
      }
    });
  }
  const double start = now_seconds();
  go = true;
  for (auto& t : threads) t.join();
  ph.seconds = now_seconds() - start;
  for (const std::string& e : errors) ZAYA_CHECK(e.empty(), "{}", e);
  ph.bytes = double(o.file_bytes) * double(paths.size());
  ph.gbps = ph.bytes / ph.seconds / 1e9;
  return ph;
}

IoRandomPages random_pages(const std::string& path, uint64_t size, long page, const IoBenchOptions& o) {
  IoRandomPages r;
  r.ran = true;
  std::mt19937_64 rng(o.seed);
  const std::vector<uint64_t> pages = distinct_random(size / uint64_t(page), uint64_t(o.page_reads), rng);
  ZAYA_CHECK(!pages.empty(), "{}: smaller than one page; nothing to read", path);
  evict(path);
  r.resident_after_evict = resident_fraction(path);
  const int nt = std::max(1, std::min<int>(o.io_threads, int(pages.size())));
  std::vector<std::vector<double>> lat(static_cast<size_t>(nt));
  std::vector<std::string> errors(static_cast<size_t>(nt));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < nt; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto buf = aligned_alloc_array<uint8_t>(size_t(2 * page));
        uint8_t* b = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.get()) + uintptr_t(page) - 1) &
                                                ~uintptr_t(page - 1));
        Fd f(path, O_RDONLY | (o.direct ? O_DIRECT : 0));
        if (!o.direct) ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_RANDOM);  // no readahead: one page per read
        while (!go.load()) std::this_thread::yield();
        for (size_t i = size_t(t); i < pages.size(); i += size_t(nt)) {
          const double t0 = now_seconds();
          const ssize_t n = ::pread(f.fd, b, size_t(page), off_t(pages[i] * uint64_t(page)));
          if (n != page) sys_fail(path, "page read");
          lat[size_t(t)].push_back((now_seconds() - t0) * 1e6);
        }
      } catch (const Error& e) {
        errors[size_t(t)] = e.what();
      }
    });
  }
  const double start = now_seconds();
  go = true;
  for (auto& th : threads) th.join();
  r.seconds = now_seconds() - start;
  for (const std::string& e : errors) ZAYA_CHECK(e.empty(), "{}", e);
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  r.reads = int64_t(all.size());
  r.iops = double(r.reads) / r.seconds;
  r.latency_us = summarize(std::move(all));
  return r;
}

// Training windows through mmap, one cold pass with MADV_RANDOM and one with the default readahead.
IoSamples sample_reads(const std::string& path, uint64_t size, long page, const IoBenchOptions& o) {
  IoSamples s;
  const uint64_t b = uint64_t(o.bytes_per_token), seq = uint64_t(o.seq_len);
  const uint64_t tokens = size / b;
  if (tokens < seq + 1) return s;  // not one window
  const uint64_t windows = (tokens - 1) / seq;
  std::mt19937_64 rng(o.seed + 17);
  const std::vector<uint64_t> w = distinct_random(windows, uint64_t(o.samples), rng);
  s.ran = true;
  s.samples = int64_t(w.size());
  s.window_bytes = (seq + 1) * b;
  s.ideal_pages = double(seq * b) / double(page);
  double touched = 0;
  for (uint64_t x : w) touched += double(pages_touched(x * seq * b, s.window_bytes, uint64_t(page)));
  s.pages_touched = touched / double(w.size());

  Fd f(path, O_RDONLY);
  for (int pass = 0; pass < 2; ++pass) {
    evict(path);
    if (pass == 0) s.resident_after_evict = resident_fraction(path);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (map == MAP_FAILED) sys_fail(path, "mmap");
    if (pass == 0) ::madvise(map, size, MADV_RANDOM);
    const volatile uint8_t* base = static_cast<const uint8_t*>(map);
    const long faults0 = major_faults();
    const double io0 = storage_read_bytes();
    const double t0 = now_seconds();
    uint64_t sink = 0;
    for (uint64_t x : w) {
      const uint64_t begin = x * seq * b, end = begin + s.window_bytes;
      for (uint64_t p = begin; p < end; p = (p / uint64_t(page) + 1) * uint64_t(page)) sink += base[p];
      sink += base[end - 1];
    }
    const double dt = (now_seconds() - t0) / double(w.size());
    const long faults = major_faults() - faults0;
    const double io = storage_read_bytes() - io0;
    ::munmap(map, size);
    if (sink == 0xdeadbeef) std::fprintf(stderr, " ");  // keep the reads
    if (pass == 0) {
      s.faults_random = double(faults) / double(w.size());
      s.seconds_random = dt;
    } else {
      s.seconds_readahead = dt;
      s.read_amplification = io0 >= 0 && io >= 0 ? io / (double(w.size()) * double(s.window_bytes)) : 0;
    }
  }
  s.sigma = std::max(1.0, s.faults_random / s.ideal_pages);
  s.extra_faults = s.faults_random - s.ideal_pages;
  return s;
}

}  // namespace

IoBenchResult run_io_bench(const IoBenchOptions& o) {
  ZAYA_CHECK_USAGE(o.files >= 1, "--files must be at least 1, got {}", o.files);
  ZAYA_CHECK_USAGE(o.block_bytes >= 4096, "--block-size must be at least 4K, got {}", o.block_bytes);
  ZAYA_CHECK(o.seq_len >= 1 && o.bytes_per_token >= 1, "sequence length and bytes per token must be positive");
  if (o.direct)
    ZAYA_CHECK_USAGE(o.block_bytes % 4096 == 0 && o.file_bytes % 4096 == 0,
                     "--direct needs --file-size and --block-size in multiples of 4 KiB");
  ZAYA_CHECK(std::filesystem::is_directory(o.dir), "--dir '{}' is not a directory", o.dir);
  IoBenchResult r;
  r.page_size = sysconf(_SC_PAGESIZE);
  std::vector<std::string> paths;
  for (int i = 0; i < o.files && o.file_bytes > 0; ++i)
    paths.push_back((std::filesystem::path(o.dir) / fmt::format("zaya-bench-io.{}.{}.bin", getpid(), i)).string());
  struct Cleanup {
    const std::vector<std::string>& paths;
    bool keep;
    ~Cleanup() {
      if (keep) return;
      for (const std::string& p : paths) ::unlink(p.c_str());
    }
  } cleanup{paths, o.keep};

  if (!paths.empty()) {
    r.write = write_files(paths, o);
    r.read = read_files(paths, o);
  }
  if (!o.dataset.empty()) {
    r.dataset_path = std::filesystem::exists(o.dataset) && !std::filesystem::is_directory(o.dataset)
                         ? o.dataset
                         : o.dataset + ".bin";
    ZAYA_CHECK(std::filesystem::exists(r.dataset_path), "--dataset '{}': neither it nor {}.bin exists", o.dataset,
               o.dataset);
  } else {
    ZAYA_CHECK(!paths.empty(), "give --dataset, or a --file-size above 0 to read from the written file");
    r.dataset_path = paths.front();
  }
  r.dataset_bytes = file_size(r.dataset_path);
  if (o.page_reads > 0) r.pages = random_pages(r.dataset_path, r.dataset_bytes, r.page_size, o);
  if (o.samples > 0) r.samples = sample_reads(r.dataset_path, r.dataset_bytes, r.page_size, o);

  r.model_input.batch = o.batch;
  r.model_input.seq_len = double(o.seq_len);
  r.model_input.bytes_per_token = o.bytes_per_token;
  r.model_input.page_size = double(r.page_size);
  r.model_input.step_seconds = o.step_seconds;
  r.model_input.iops = o.iops > 0 ? o.iops : r.pages.iops;
  r.model_input.sigma = r.samples.ran ? r.samples.sigma : 1.0;
  r.model = storage_model(r.model_input);
  return r;
}

nlohmann::json io_bench_json(const IoBenchOptions& o, const IoBenchResult& r) {
  auto phase = [](const IoPhase& p) -> nlohmann::json {
    if (!p.ran) return nullptr;
    return {{"bytes", p.bytes},
            {"seconds", p.seconds},
            {"gbps", p.gbps},
            {"fsync_seconds", p.sync_seconds},
            {"resident_after_evict", p.resident_after_evict}};
  };
  nlohmann::json pages = nullptr, samples = nullptr;
  if (r.pages.ran)
    pages = {{"reads", r.pages.reads},
             {"threads", o.io_threads},
             {"seconds", r.pages.seconds},
             {"iops", r.pages.iops},
             {"latency_us",
              {{"min", r.pages.latency_us.min},
               {"p50", r.pages.latency_us.p50},
               {"p99", r.pages.latency_us.p99},
               {"max", r.pages.latency_us.max},
               {"mean", r.pages.latency_us.mean}}},
             {"resident_after_evict", r.pages.resident_after_evict}};
  if (r.samples.ran)
    samples = {{"samples", r.samples.samples},
               {"window_bytes", r.samples.window_bytes},
               {"ideal_pages", r.samples.ideal_pages},
               {"pages_touched", r.samples.pages_touched},
               {"faults_random", r.samples.faults_random},
               {"extra_faults", r.samples.extra_faults},
               {"sigma", r.samples.sigma},
               {"seconds_random", r.samples.seconds_random},
               {"seconds_readahead", r.samples.seconds_readahead},
               {"read_amplification", r.samples.read_amplification},
               {"resident_after_evict", r.samples.resident_after_evict}};
  const StorageModelInput& in = r.model_input;
  const StorageModel& m = r.model;
  nlohmann::json sigma_table = nlohmann::json::array();
  for (const StorageModelAtSigma& y : storage_model_sigma_table(in))
    sigma_table.push_back({{"sigma", y.sigma},
                           {"required_iops", y.model.required_iops},
                           {"break_even_seconds", y.model.break_even_seconds},
                           {"storage_safe", y.model.storage_safe}});
  return {{"bench", "io"},
          {"format_version", 1},
          {"machine", machine_json(machine_info())},
          {"config",
           {{"dir", o.dir},
            {"file_bytes", o.file_bytes},
            {"files", o.files},
            {"block_bytes", o.block_bytes},
            {"direct", o.direct},
            {"dataset", r.dataset_path},
            {"dataset_bytes", r.dataset_bytes},
            {"page_size", r.page_size},
            {"page_reads", o.page_reads},
            {"io_threads", o.io_threads},
            {"samples", o.samples},
            {"seq_len", o.seq_len},
            {"bytes_per_token", o.bytes_per_token}}},
          {"checkpoint_write", phase(r.write)},
          {"checkpoint_read", phase(r.read)},
          {"random_pages", pages},
          {"sample_reads", samples},
          {"storage_model",
           {{"batch", in.batch},
            {"seq_len", in.seq_len},
            {"bytes_per_token", in.bytes_per_token},
            {"page_size", in.page_size},
            {"step_seconds", in.step_seconds},
            {"iops", in.iops},
            {"iops_measured", o.iops <= 0},
            {"sigma", in.sigma},
            {"bytes_per_step", m.bytes_per_step},
            {"ideal_pages_per_step", m.ideal_pages_per_step},
            {"io_per_step", m.io_per_step},
            {"required_iops", m.required_iops},
            {"break_even_seconds", m.break_even_seconds},
            {"headroom", m.headroom},
            {"storage_safe", m.storage_safe},
            {"by_sigma", sigma_table}}}};
}

}  // namespace zaya
