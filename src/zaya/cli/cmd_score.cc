// zaya score: mean next-token loss of each sequence in a JSON list of token-id
// lists, with the cached decoder (the full-sequence forward with --full-sequence
// or --dump-logits, which needs every logit).
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/infer/full_sequence.h"
#include "zaya/infer/scorer.h"
#include "zaya/model/hf_checkpoint.h"

namespace zaya::cli {

void add_score_command(CLI::App& app) {
  struct Options {
    std::string model, tokens, dump_logits, json_out;
    bool full_sequence = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("score", "mean loss per sequence of a JSON list of token-id lists");
  cmd->add_option("--model", o->model, "model directory")->required();
  cmd->add_option("--tokens", o->tokens, "JSON file: [[id, id, ...], ...]")->required()->check(CLI::ExistingFile);
  cmd->add_option("--dump-logits", o->dump_logits, "write the logits as JSON [seq][position][vocab] to this file");
  cmd->add_option("--json", o->json_out, "write the losses as JSON to this file");
  cmd->add_flag("--full-sequence", o->full_sequence, "reference path: the training forward pass (no cache)");
  cmd->callback([o] {
    std::ifstream in(o->tokens);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: invalid JSON: {}", o->tokens, e.what());
    }
    ZAYA_CHECK(j.is_array(), "{}: expected a JSON list of token-id lists", o->tokens);
    auto im = InferModel::open(o->model);
    const int64_t V = im->config().real_vocab_size;
    std::vector<std::vector<int32_t>> seqs;
    for (size_t i = 0; i < j.size(); ++i) {
      ZAYA_CHECK(j[i].is_array(), "{}: entry {} is not a list of token ids", o->tokens, i);
      std::vector<int32_t> s;
      for (size_t k = 0; k < j[i].size(); ++k) {
        ZAYA_CHECK(j[i][k].is_number_integer() && j[i][k].get<int64_t>() >= 0 && j[i][k].get<int64_t>() < V,
                   "{}: sequence {} position {}: {} is not a token id in 0..{}", o->tokens, i, k, j[i][k].dump(),
                   V - 1);
        s.push_back(j[i][k].get<int32_t>());
      }
      seqs.push_back(std::move(s));
    }
    std::vector<SequenceScore> scores;
    if (o->full_sequence || !o->dump_logits.empty()) {
      scores = score_sequences(*load_hf_model(o->model), seqs, !o->dump_logits.empty());
    } else {
      std::vector<ScoreGroup> groups;
      for (size_t i = 0; i < seqs.size(); ++i) {
        ZAYA_CHECK(seqs[i].size() >= 2, "{}: sequence {} has {} tokens; scoring needs at least 2", o->tokens, i,
                   seqs[i].size());
        groups.push_back({{seqs[i][0]}, {std::vector<int32_t>(seqs[i].begin() + 1, seqs[i].end())}});
      }
      ScorerOptions so;
      so.bf16_activations = false;  // f32 activations: the numbers of the full-sequence forward
      for (const auto& g : score_groups(*im, groups, so)) {
        SequenceScore sc;
        sc.tokens = g[0].tokens;
        sc.mean_loss = -g[0].logprob / double(g[0].tokens);
        scores.push_back(std::move(sc));
      }
    }
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < scores.size(); ++i) {
      fmt::print("sequence {}: {} tokens scored, mean loss {:.6f} nats/token\n", i, scores[i].tokens,
                 scores[i].mean_loss);
      out.push_back({{"tokens", scores[i].tokens}, {"mean_loss", scores[i].mean_loss}});
    }
    if (!o->json_out.empty()) std::ofstream(o->json_out) << out.dump(1) << "\n";
    if (!o->dump_logits.empty()) {
      std::ofstream f(o->dump_logits);
      ZAYA_CHECK(f.good(), "cannot write '{}'", o->dump_logits);
      f << "[";
      for (size_t i = 0; i < scores.size(); ++i) {
        f << (i ? ",\n[" : "[");
        const int64_t S = int64_t(seqs[i].size());
        for (int64_t t = 0; t < S; ++t) {
          f << (t ? ",[" : "[");
          for (int64_t v = 0; v < V; ++v) f << (v ? "," : "") << fmt::format("{:.7g}", scores[i].logits[t * V + v]);
          f << "]";
        }
        f << "]";
      }
      f << "]\n";
    }
  });
}

}  // namespace zaya::cli
