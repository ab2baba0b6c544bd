#pragma once
// Byte sizes on the command line and in tables, as nccl-tests writes them:
// "8", "32M", "1.5G"; K, M, G and T are powers of 1024 (an optional trailing
// "B" or "iB" is accepted: "4KiB", "64MB").

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

// Parses a size; throws zaya::Error naming `what` (e.g. "--minbytes") on bad input.
uint64_t parse_byte_size(const std::string& text, const std::string& what);

// The message parse_byte_size would throw, or "" when `text` is a valid size
// (for command-line validators, so that a bad size is a usage error).
std::string byte_size_error(const std::string& text);

// "512 B", "4 KiB", "1.5 MiB", "2 GiB": exact where possible, else one decimal.
std::string format_bytes(double bytes);

// The nccl-tests size sweep: from min_bytes to max_bytes, multiplying by
// step_factor when it is above 1, else adding step_bytes. Fails on an empty
// or endless sweep.
std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_factor, uint64_t step_bytes);

}  // namespace zaya
