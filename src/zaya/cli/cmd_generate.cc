// zaya generate: sample text from trained weights (full-sequence forward per token).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/data/tokenizer.h"
#include "zaya/infer/full_sequence.h"
#include "zaya/model/hf_checkpoint.h"

namespace zaya::cli {

void add_generate_command(CLI::App& app) {
  struct Options {
    std::string model, tokenizer, prompt;
    GenerateOptions gen;
    int64_t samples = 1;
    bool no_bos = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("generate", "generate text from a model directory");
  cmd->add_option("--model", o->model, "model directory (config.json + model.safetensors)")->required();
  cmd->add_option("--tokenizer", o->tokenizer, "SentencePiece model (default: MODEL/tokenizer.model)");
  cmd->add_option("--prompt", o->prompt, "text to continue");
  cmd->add_option("--max-new-tokens", o->gen.max_new_tokens, "tokens to generate")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--temperature", o->gen.sampling.temperature, "0 = greedy");
  cmd->add_option("--top-k", o->gen.sampling.top_k, "keep the k most likely tokens (0: all)");
  cmd->add_option("--top-p", o->gen.sampling.top_p, "nucleus sampling mass");
  cmd->add_option("--seed", o->gen.sampling.seed, "sampling seed");
  cmd->add_option("--samples", o->samples, "number of samples")->check(CLI::Range(1, 1000));
  cmd->add_flag("--no-bos", o->no_bos, "do not prepend the BOS token");
  cmd->callback([o] {
    o->gen.sampling.validate();  // flags first, before any file is read
    std::string tok_path = o->tokenizer.empty() ? (std::filesystem::path(o->model) / "tokenizer.model").string()
                                                : o->tokenizer;
    Tokenizer tok = Tokenizer::load(tok_path);
    auto model = load_hf_model(o->model);
    ZAYA_CHECK(tok.vocab_size() <= model->config().real_vocab_size,
               "tokenizer '{}' has {} pieces but the model predicts only {} ids (zaya_real_vocab_size)", tok_path,
               tok.vocab_size(), model->config().real_vocab_size);
    std::vector<int32_t> prompt;
    if (!o->no_bos) prompt.push_back(tok.bos_id());
    for (int32_t id : tok.encode(o->prompt)) prompt.push_back(id);
    GenerateOptions gen = o->gen;
    gen.stop_ids = {tok.eos_id()};
    for (int64_t s = 0; s < o->samples; ++s) {
      gen.sampling.seed = o->gen.sampling.seed + uint64_t(s);
      if (o->samples > 1) fmt::print("--- sample {} ---\n", s + 1);
      fmt::print("{}", o->prompt);
      std::fflush(stdout);
      // Stream: print the text each new token adds to the decoded continuation.
      std::vector<int32_t> out;
      std::string shown;
      generate_full_sequence(*model, prompt, gen, [&](int32_t id) {
        if (id == tok.eos_id()) return true;
        out.push_back(id);
        std::string text = tok.decode(out);
        if (text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0) {
          fmt::print("{}", text.substr(shown.size()));
          std::fflush(stdout);
          shown = text;
        }
        return true;
      });
      fmt::print("\n");
    }
  });
}

}  // namespace zaya::cli
