#include "zaya/data/corpus_input.h"

#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/data/compressed_input.h"
#include "zaya/data/corpus.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

CorpusFormat format_of_name(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  for (const char* z : {".gz", ".zst", ".zstd"})
    if (ends_with(name, z)) name.resize(name.size() - std::char_traits<char>::length(z));
  for (const char* j : {".jsonl", ".ndjson", ".json"})
    if (ends_with(name, j)) return CorpusFormat::kJsonl;
  return CorpusFormat::kText;
}

bool has_glob_characters(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

void add_file(std::vector<CorpusFile>& out, const std::string& path, CorpusFormat format) {
  std::error_code ec;
  const uint64_t bytes = fs::file_size(path, ec);
  ZAYA_CHECK(!ec, "{}: cannot read the corpus file's size: {}", path, ec.message());
  out.push_back(CorpusFile{path, format == CorpusFormat::kAuto ? format_of_name(path) : format, bytes});
}

// The value at dotted path `field` of `j`, or null with `why` set.
const nlohmann::json* find_field(const nlohmann::json& j, const std::string& field, std::string& why) {
  const nlohmann::json* at = &j;
  size_t start = 0;
  for (;;) {
    const size_t dot = field.find('.', start);
    const std::string key = field.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!at->is_object()) {
      why = fmt::format("field '{}' not found: '{}' is a JSON {}, not an object", field,
                        start == 0 ? std::string("the line") : field.substr(0, start - 1), at->type_name());
      return nullptr;
    }
    auto it = at->find(key);
    if (it == at->end()) {
      why = fmt::format("field '{}' not found (the object has no key '{}')", field, key);
      return nullptr;
    }
    at = &*it;
    if (dot == std::string::npos) return at;
    start = dot + 1;
  }
}

}  // namespace

CorpusFormat parse_corpus_format(const std::string& name) {
  if (name == "auto") return CorpusFormat::kAuto;
  if (name == "text") return CorpusFormat::kText;
  if (name == "jsonl") return CorpusFormat::kJsonl;
  fail("corpus format '{}' is not known; expected 'auto', 'text' or 'jsonl'", name);
}

std::vector<CorpusFile> expand_corpus_inputs(const CorpusSpec& spec) {
  ZAYA_CHECK(!spec.inputs.empty(), "corpus: no input files; give files, directories or glob patterns");
  ZAYA_CHECK(!spec.field.empty() && spec.field.front() != '.' && spec.field.back() != '.' &&
                 spec.field.find("..") == std::string::npos,
             "corpus: field '{}' is not a dotted path; expected e.g. 'text' or 'meta.body'", spec.field);
  std::vector<CorpusFile> out;
  for (const std::string& input : spec.inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(input, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_regular_file(ec)) found.push_back(it->path().string());
      ZAYA_CHECK(!ec, "{}: cannot list the corpus directory: {}", input, ec.message());
      std::sort(found.begin(), found.end());
      ZAYA_CHECK(!found.empty(), "{}: the corpus directory holds no files", input);
      for (const auto& f : found) add_file(out, f, spec.format);
    } else if (fs::exists(input, ec)) {
      add_file(out, input, spec.format);
    } else if (has_glob_characters(input)) {
      glob_t g{};
      const int rc = ::glob(input.c_str(), 0, nullptr, &g);
      std::vector<std::string> found;
      if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i)
          if (fs::is_regular_file(g.gl_pathv[i], ec)) found.push_back(g.gl_pathv[i]);
      ::globfree(&g);
      ZAYA_CHECK(!found.empty(), "corpus: the pattern '{}' matches no file", input);
      std::sort(found.begin(), found.end());
      for (const auto& f : found) add_file(out, f, spec.format);
    } else {
      fail("{}: cannot open corpus for reading: no such file, directory or matching pattern", input);
    }
  }
  return out;
}

CorpusRecordReader::CorpusRecordReader(std::vector<CorpusFile> files) : files_(std::move(files)) {
  for (const auto& f : files_) bytes_total_ += f.bytes;
}

CorpusRecordReader::~CorpusRecordReader() = default;

uint64_t CorpusRecordReader::bytes_read() const {
  return bytes_done_ + (reader_ ? std::min(reader_->file_bytes_read(), files_[current_].bytes) : 0);
}

bool CorpusRecordReader::next(CorpusRecord& record) {
  for (;;) {
    if (!reader_) {
      if (current_ == files_.size()) return false;
      reader_ = std::make_unique<CompressedLineReader>(files_[current_].path);
    }
    const bool jsonl = files_[current_].format == CorpusFormat::kJsonl;
    // Skip blank lines (between text documents, or anywhere in JSONL).
    bool found = false;
    while (reader_->next(line_))
      if (!is_blank_line(line_)) {
        found = true;
        break;
      }
    if (found) {
      record.file = static_cast<uint32_t>(current_);
      record.line = reader_->line_number();
      record.jsonl = jsonl;
      record.text = line_;
      if (!jsonl)
        while (reader_->next(line_) && !is_blank_line(line_)) {
          record.text += '\n';
          record.text += line_;
        }
      return true;
    }
    bytes_done_ += files_[current_].bytes;
    reader_.reset();
    ++current_;
  }
}

namespace {

// The invalid-UTF-8 error of `record`, or "" when it is valid UTF-8.
std::string utf8_error(const CorpusRecord& record, const std::string& path) {
  const size_t bad = find_invalid_utf8(record.text);
  if (bad == std::string::npos) return "";
  // The line and column of the bad byte inside the record.
  const size_t line_start = record.text.rfind('\n', bad == 0 ? 0 : bad - 1);
  const uint64_t line =
      record.line + static_cast<uint64_t>(std::count(record.text.begin(), record.text.begin() + bad, '\n'));
  const size_t column = bad - (line_start == std::string::npos || line_start >= bad ? 0 : line_start + 1) + 1;
  return fmt::format("{}: line {}: invalid UTF-8 (byte 0x{:02x} at column {}); the corpus must be UTF-8 text", path,
                     line, static_cast<unsigned char>(record.text[bad]), column);
}

}  // namespace

DecodedJson decode_json_record(CorpusRecord&& record, const std::vector<CorpusFile>& files) {
  DecodedJson out;
  const std::string& path = files[record.file].path;
  out.where = fmt::format("{}: line {}", path, record.line);
  if (!record.jsonl) {
    out.error = fmt::format("{}: not a JSON line (the file is read as text); expected JSONL", out.where);
    return out;
  }
  out.error = utf8_error(record, path);
  if (!out.error.empty()) return out;
  try {
    out.value = parse_json(record.text, out.where);
  } catch (const Error& e) {
    out.error = e.what();
    return out;
  }
  out.ok = true;
  return out;
}

DecodedRecord decode_record(CorpusRecord&& record, const std::vector<CorpusFile>& files, const std::string& field) {
  DecodedRecord out;
  if (!record.jsonl) {
    out.error = utf8_error(record, files[record.file].path);
    if (!out.error.empty()) return out;
    out.ok = true;
    out.text = std::move(record.text);
    return out;
  }
  DecodedJson d = decode_json_record(std::move(record), files);
  if (!d.ok) {
    out.error = std::move(d.error);
    return out;
  }
  const nlohmann::json& j = d.value;
  const std::string& where = d.where;
  std::string why;
  const nlohmann::json* v = find_field(j, field, why);
  if (v == nullptr) {
    out.error = fmt::format("{}: {}", where, why);
    return out;
  }
  if (!v->is_string()) {
    out.error = fmt::format("{}: field '{}' is a JSON {}, expected a string", where, field, v->type_name());
    return out;
  }
  out.ok = true;
  out.text = v->get<std::string>();
  return out;
}

}  // namespace zaya
