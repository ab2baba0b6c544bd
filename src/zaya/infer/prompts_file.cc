#include "zaya/infer/prompts_file.h"

#include "zaya/core/error.h"
#include "zaya/infer/prompt_input.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

// The request of one parsed line (throws zaya::Error naming `at`).
void parse_line(const nlohmann::ordered_json& j, const std::string& at, PromptLine& line) {
  ZAYA_CHECK(j.is_object(), "{}: expected an object with a string \"prompt\"", at);
  if (j.contains("id")) line.id = j["id"];
  ZAYA_CHECK(j.contains("prompt") && j["prompt"].is_string(), "{}: expected an object with a string \"prompt\"", at);
  TextRequest& r = line.request;
  r.prompt = j["prompt"].get<std::string>();
  line.has_prompt = true;
  GenerationRequest& g = r.generation;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const auto& v = it.value();
    auto want_int = [&] {
      ZAYA_CHECK(v.is_number_integer(), "{}: \"{}\" = {} must be an integer", at, k, json_preview(v));
      return v.get<int64_t>();
    };
    auto want_num = [&] {
      ZAYA_CHECK(v.is_number(), "{}: \"{}\" = {} must be a number", at, k, json_preview(v));
      return v.get<double>();
    };
    if (k == "prompt" || k == "id") continue;
    if (k == "max_new_tokens") {
      g.max_new_tokens = want_int();
      ZAYA_CHECK(g.max_new_tokens >= 0, "{}: \"max_new_tokens\" = {} is invalid; allowed: >= 0", at, g.max_new_tokens);
    } else if (k == "seed") {
      g.sampling.seed = uint64_t(want_int());
    } else if (k == "temperature") {
      g.sampling.temperature = want_num();
    } else if (k == "top_k") {
      g.sampling.top_k = want_int();
    } else if (k == "top_p") {
      g.sampling.top_p = want_num();
    } else if (k == "ignore_eos") {
      ZAYA_CHECK(v.is_boolean(), "{}: \"ignore_eos\" = {} must be true or false", at, json_preview(v));
      r.ignore_eos = v.get<bool>();
    } else {
      fail("{}: unknown key \"{}\"; allowed: prompt, max_new_tokens, seed, temperature, top_k, top_p, ignore_eos, id",
           at, k);
    }
  }
  try {
    g.sampling.validate();
  } catch (const Error& e) {
    fail("{}: {}", at, e.what());
  }
}

}  // namespace

std::vector<PromptLine> parse_prompt_lines(std::string_view text, const std::string& name,
                                           const TextRequest& defaults) {
  std::vector<PromptLine> out;
  int64_t n = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view row = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++n;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    PromptLine line;
    line.request = defaults;
    line.where = name + ":" + std::to_string(n);
    try {
      parse_line(parse_json<nlohmann::ordered_json>(row, line.where), line.where, line);
    } catch (const Error& e) {
      line.error = e.what();
    }
    out.push_back(std::move(line));
  }
  return out;
}

std::vector<PromptLine> read_prompts_file(const std::string& path, const TextRequest& defaults, std::istream& in) {
  const std::string name = input_name(path);
  std::vector<PromptLine> out = parse_prompt_lines(read_input_text(path, "--prompts", in), name, defaults);
  ZAYA_CHECK(!out.empty(), "{}: no prompts (one JSON object per line)", name);
  return out;
}

}  // namespace zaya
