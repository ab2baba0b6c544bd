#include "zaya/data/megatron_index.h"

#include <cstring>

#include "zaya/core/error.h"
#include "zaya/data/megatron_format.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {

MegatronIndex read_megatron_index(const std::string& path) {
  const FileDescriptor f = FileDescriptor::open_read(path);
  const uint64_t size = f.size();
  ZAYA_CHECK(size >= kMegatronHeaderBytes,
             "{}: file is {} bytes, shorter than the {}-byte Megatron index header (truncated)", path, size,
             kMegatronHeaderBytes);
  unsigned char h[kMegatronHeaderBytes];
  f.read_exact(h, sizeof(h), 0, "the Megatron index header");
  ZAYA_CHECK(std::memcmp(h, kMegatronIdxMagic.data(), kMegatronIdxMagic.size()) == 0,
             "{}: magic is not 'MMIDIDX\\x00\\x00' (not a Megatron index)", path);
  uint64_t version, sequences, doc_count;
  std::memcpy(&version, h + 9, 8);
  std::memcpy(&sequences, h + 18, 8);
  std::memcpy(&doc_count, h + 26, 8);
  MegatronIndex out;
  out.dtype = h[17];
  ZAYA_CHECK(version == kMegatronVersion, "{}: version {} is not supported; expected {}", path, version,
             kMegatronVersion);
  out.token_bytes = megatron_token_bytes(out.dtype);
  ZAYA_CHECK(out.token_bytes != 0,
             "{}: dtype code {} is not a token type zaya reads; expected 1 (uint8), 3 (int16), 4 (int32) or 8 "
             "(uint16)",
             path, out.dtype);
  // Expected size 34 + 12 S + 8 C, checked without overflow for garbage counts.
  const uint64_t body = size - kMegatronHeaderBytes;
  ZAYA_CHECK(sequences <= body / 12 && doc_count <= body / 8 && 12 * sequences + 8 * doc_count == body,
             "{}: {} sequences and {} document indices need {} + 12 * {} + 8 * {} bytes, but the file is {} bytes "
             "(truncated, corrupt, or Megatron's multimodal variant, which is not supported)",
             path, sequences, doc_count, kMegatronHeaderBytes, sequences, doc_count, size);
  out.sequences = sequences;
  std::vector<int32_t> lengths(sequences);
  std::vector<int64_t> pointers(sequences), docs(doc_count);
  f.read_exact(lengths.data(), 4 * sequences, kMegatronHeaderBytes, "the sequence lengths");
  f.read_exact(pointers.data(), 8 * sequences, kMegatronHeaderBytes + 4 * sequences, "the sequence pointers");
  f.read_exact(docs.data(), 8 * doc_count, kMegatronHeaderBytes + 12 * sequences, "the document indices");

  // Token offset of each sequence (sequences + 1 entries).
  std::vector<uint64_t> seq_start(sequences + 1, 0);
  for (uint64_t i = 0; i < sequences; ++i) {
    ZAYA_CHECK(lengths[i] >= 0, "{}: sequence {} has length {}; expected >= 0", path, i, lengths[i]);
    const uint64_t byte = seq_start[i] * out.token_bytes;
    ZAYA_CHECK(pointers[i] >= 0 && static_cast<uint64_t>(pointers[i]) == byte,
               "{}: sequence {} starts at byte {}, but the sequences before it end at byte {}; zaya reads only "
               "datasets whose sequences lie back to back, as Megatron writes them",
               path, i, pointers[i], byte);
    seq_start[i + 1] = seq_start[i] + static_cast<uint64_t>(lengths[i]);
  }
  ZAYA_CHECK(doc_count >= 1 && docs[0] == 0, "{}: document index 0 is {}; expected 0", path,
             doc_count == 0 ? int64_t{-1} : docs[0]);
  for (uint64_t d = 1; d < doc_count; ++d)
    ZAYA_CHECK(docs[d] >= docs[d - 1] && static_cast<uint64_t>(docs[d]) <= sequences,
               "{}: document index {} is {}, outside [{}, {}] (document indices must not decrease and end at the "
               "sequence count)",
               path, d, docs[d], docs[d - 1], sequences);
  ZAYA_CHECK(static_cast<uint64_t>(docs.back()) == sequences,
             "{}: the last document index is {}, but there are {} sequences", path, docs.back(), sequences);
  out.document_offsets.resize(doc_count);
  for (uint64_t d = 0; d < doc_count; ++d) out.document_offsets[d] = seq_start[static_cast<size_t>(docs[d])];
  return out;
}

}  // namespace zaya
