#include "zaya/infer/trained_context.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace zaya {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return s.str();
}

std::optional<TrainedContext> from_toml_text(const std::optional<std::string>& text, const std::string& source) {
  if (!text) return std::nullopt;
  const std::optional<int64_t> n = trained_seq_len_from_toml(*text);
  if (!n) return std::nullopt;
  return TrainedContext{*n, source};
}

}  // namespace

std::optional<int64_t> trained_seq_len_from_toml(const std::string& toml_text) {
  toml::table root;
  try {
    root = toml::parse(toml_text);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
  // A recipe sets seq_len per phase (train.seq_len is refused there); the
  // model has seen the longest of them.
  std::optional<int64_t> longest;
  if (const toml::array* phases = root["phase"].as_array())
    for (const toml::node& phase : *phases)
      if (const toml::table* t = phase.as_table())
        if (std::optional<int64_t> n = (*t)["seq_len"].value<int64_t>(); n && *n > 0)
          longest = std::max(longest.value_or(0), *n);
  if (longest) return longest;
  if (std::optional<int64_t> n = root["train"]["seq_len"].value<int64_t>(); n && *n > 0) return n;
  return std::nullopt;
}

std::optional<TrainedContext> trained_context(const std::string& model_path) {
  std::error_code ec;
  fs::path dir = fs::path(model_path).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "runs/tiny/final/"
  if (!fs::is_directory(dir, ec)) return std::nullopt;  // a GGUF file records no training config
  const fs::path meta = dir / "metadata.json";
  if (fs::exists(meta, ec)) {
    const std::optional<std::string> text = read_text(meta);
    if (!text) return std::nullopt;
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("config") || !j["config"].is_string()) return std::nullopt;
    return from_toml_text(j["config"].get<std::string>(), meta.string() + " (config)");
  }
  // Only a run's own final/ (train/final_weights.h): a directory exported or
  // copied elsewhere may sit beside some other run's config.
  if (dir.filename() != "final" || !fs::exists(dir / "config.json", ec)) return std::nullopt;
  const fs::path run_config = dir.parent_path() / "config.toml";
  if (!fs::exists(run_config, ec)) return std::nullopt;
  return from_toml_text(read_text(run_config), run_config.string());
}

std::string context_note(int64_t context, const std::string& flag, const std::optional<TrainedContext>& trained) {
  if (!trained || context <= trained->seq_len) return "";
  return fmt::format(
      "note: the perplexity window is {} tokens ({}), but the model was trained on sequences of {} ({}): "
      "positions past {} were never trained, so a long document scores worse than in training's validation; "
      "--context {} measures what training measured\n",
      context, flag, trained->seq_len, trained->source, trained->seq_len, trained->seq_len);
}

}  // namespace zaya
