#include "zaya/infer/prompts_file.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "zaya/core/error.h"

namespace zaya {

std::vector<TextRequest> read_prompts_file(const std::string& path, const TextRequest& defaults) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot read '{}'", path);
  std::vector<TextRequest> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{}:{}: invalid JSON: {}", path, n, e.what());
    }
    ZAYA_CHECK(j.is_object() && j.contains("prompt") && j["prompt"].is_string(),
               "{}:{}: expected an object with a string \"prompt\"", path, n);
    TextRequest r = defaults;
    r.prompt = j["prompt"].get<std::string>();
    GenerationRequest& g = r.generation;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      const auto& v = it.value();
      auto want_int = [&] {
        ZAYA_CHECK(v.is_number_integer(), "{}:{}: \"{}\" = {} must be an integer", path, n, k, v.dump());
        return v.get<int64_t>();
      };
      auto want_num = [&] {
        ZAYA_CHECK(v.is_number(), "{}:{}: \"{}\" = {} must be a number", path, n, k, v.dump());
        return v.get<double>();
      };
      if (k == "prompt" || k == "id") continue;
      if (k == "max_new_tokens")
        g.max_new_tokens = want_int();
      else if (k == "seed")
        g.sampling.seed = uint64_t(want_int());
      else if (k == "temperature")
        g.sampling.temperature = want_num();
      else if (k == "top_k")
        g.sampling.top_k = want_int();
      else if (k == "top_p")
        g.sampling.top_p = want_num();
      else
        fail("{}:{}: unknown key \"{}\"; allowed: prompt, max_new_tokens, seed, temperature, top_k, top_p, id", path, n,
             k);
    }
    try {
      g.sampling.validate();
    } catch (const Error& e) {
      fail("{}:{}: {}", path, n, e.what());
    }
    out.push_back(std::move(r));
  }
  ZAYA_CHECK(!out.empty(), "{}: no prompts (one JSON object per line)", path);
  return out;
}

}  // namespace zaya
