#pragma once
// What the storage benchmark (io_bench.h) measures around its reads: a file's
// pages in the page cache (dropped, counted), this process's major page
// faults and storage reads, and random page choices.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace zaya {

uint64_t file_size(const std::string& path);
// Drops the file's clean pages from the page cache.
void evict(const std::string& path);
// Fraction of the file's pages in the page cache (mincore), or -1 when unknown.
double resident_fraction(const std::string& path);
// Major page faults of this process so far.
long major_faults();
// Bytes this process caused to be read from storage (/proc/self/io), or -1.
double storage_read_bytes();
// k distinct values in [0, n), in random order (Floyd's algorithm, then a shuffle).
std::vector<uint64_t> distinct_random(uint64_t n, uint64_t k, std::mt19937_64& rng);

}  // namespace zaya
