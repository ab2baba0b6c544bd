#include "zaya/infer/prompts_file.h"

#include <nlohmann/json.hpp>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {

std::vector<TextRequest> read_prompts_file(const std::string& path, const TextRequest& defaults) {
  std::vector<TextRequest> out;
  read_json_lines(path, [&](nlohmann::json&& j, const std::string& at) {
    ZAYA_CHECK(j.is_object() && j.contains("prompt") && j["prompt"].is_string(),
               "{}: expected an object with a string \"prompt\"", at);
    TextRequest r = defaults;
    r.prompt = j["prompt"].get<std::string>();
    GenerationRequest& g = r.generation;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      const auto& v = it.value();
      auto want_int = [&] {
        ZAYA_CHECK(v.is_number_integer(), "{}: \"{}\" = {} must be an integer", at, k, v.dump());
        return v.get<int64_t>();
      };
      auto want_num = [&] {
        ZAYA_CHECK(v.is_number(), "{}: \"{}\" = {} must be a number", at, k, v.dump());
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
        fail("{}: unknown key \"{}\"; allowed: prompt, max_new_tokens, seed, temperature, top_k, top_p, id", at, k);
    }
    try {
      g.sampling.validate();
    } catch (const Error& e) {
      fail("{}: {}", at, e.what());
    }
    out.push_back(std::move(r));
    return true;
  });
  ZAYA_CHECK(!out.empty(), "{}: no prompts (one JSON object per line)", path);
  return out;
}

}  // namespace zaya
