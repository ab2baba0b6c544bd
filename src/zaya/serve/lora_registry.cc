#include "zaya/serve/lora_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "zaya/core/error.h"

namespace zaya {
namespace {

constexpr size_t kMaxNameBytes = 256;

// Printable ASCII without spaces or quotes: names go into URLs, logs and JSON.
bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= kMaxNameBytes && std::all_of(name.begin(), name.end(), [](char ch) {
    return ch > ' ' && ch < 127 && ch != '"' && ch != '\'' && ch != '\\';
  });
}

}  // namespace

LoraRegistry::LoraRegistry(const InferModel& model, std::string base_name, int64_t max_adapters, bool strict)
    : model_(model), base_(std::move(base_name)), max_adapters_(max_adapters), strict_(strict) {}

std::string LoraRegistry::served_names() const {
  std::string names = "\"" + base_ + "\" (the base model)";
  for (const Served& s : served_) names += ", \"" + s.name + "\"";
  return names;
}

LoraRegistry::Outcome LoraRegistry::load(const std::string& name, const std::string& path) {
  if (!valid_name(name))
    return {400,
            fmt::format("'lora_name' must be 1 to {} printable characters without spaces, quotes or backslashes",
                        kMaxNameBytes),
            "lora_name"};
  if (name == base_) return {400, fmt::format("'lora_name' \"{}\" is the base model's name", name), "lora_name"};
  if (path.empty()) return {400, "'lora_path' must name a PEFT adapter directory", "lora_path"};
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Served& s : served_)
      if (s.name == name)
        return {400, fmt::format("the LoRA adapter \"{}\" is loaded already (from {}); unload it first", name, s.path),
                "lora_name"};
    if (int64_t(served_.size()) >= max_adapters_)
      return {400, fmt::format("{} LoRA adapters are loaded, the most this server holds (--max-loras)", max_adapters_),
              "lora_name"};
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec))
    return {400,
            fmt::format("'lora_path' {} is not a directory (a PEFT adapter: adapter_config.json and "
                        "adapter_model.safetensors)",
                        path),
            "lora_path"};
  std::shared_ptr<const LoraAdapters> lora;
  try {
    lora = load_lora_adapter(path, model_.config());
  } catch (const std::exception& e) {  // zaya::Error, or a JSON parser's
    return {400, fmt::format("'lora_path' {} is not a LoRA adapter for this model: {}", path, e.what()), "lora_path"};
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const Served& s : served_)  // another call may have taken the name while this one read the files
    if (s.name == name) return {400, fmt::format("the LoRA adapter \"{}\" is loaded already", name), "lora_name"};
  if (int64_t(served_.size()) >= max_adapters_)
    return {400, fmt::format("{} LoRA adapters are loaded, the most this server holds (--max-loras)", max_adapters_),
            "lora_name"};
  served_.push_back({name, path, std::move(lora), int64_t(std::time(nullptr))});
  return {};
}

LoraRegistry::Outcome LoraRegistry::unload(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = std::find_if(served_.begin(), served_.end(), [&](const Served& s) { return s.name == name; });
  if (it == served_.end())
    return {404, fmt::format("no LoRA adapter \"{}\" is loaded; served: {}", name, served_names()), "lora_name"};
  served_.erase(it);  // requests holding it finish with it
  return {};
}

LoraRegistry::Pick LoraRegistry::pick(const std::string& model) const {
  if (model.empty() || model == base_) return {nullptr, base_, ""};
  std::lock_guard<std::mutex> lock(mu_);
  for (const Served& s : served_)
    if (s.name == model) return {s.lora, s.name, ""};
  if (!strict_) return {nullptr, base_, ""};
  return {nullptr, "",
          fmt::format("the model \"{}\" does not exist; 'model' must be one of: {}", model, served_names())};
}

ojson LoraRegistry::models(int64_t created) const {
  ojson j = api_models(base_, created);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Served& s : served_)
    j["data"].push_back({{"id", s.name},
                         {"object", "model"},
                         {"created", s.created},
                         {"owned_by", "zaya"},
                         {"root", s.path},
                         {"parent", base_}});
  return j;
}

int64_t LoraRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(served_.size());
}

}  // namespace zaya
