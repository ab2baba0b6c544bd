// Drafting with a draft model (spec_model.h, --spec-model): greedy speculative
// generation equals plain greedy generation token for token (prompts, batch
// sizes, K, adaptive or not, f32 / bf16 / int8 target weights, a draft that
// agrees often and one that rarely does, a stop id inside an accepted run);
// the draft model's state after rejected drafts is that of a run that never
// saw them (the same bits of its next distributions, no pages left behind);
// tokens sampled with a draft model follow the target's distribution
// (chi-square); a draft model that is missing or has another tokenizer fails
// naming both models.
#include "zaya/infer/spec_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "zaya/data/test_util.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/spec_decode.h"
#include "zaya/infer/test_util.h"
#include "zaya/infer/text.h"

namespace zaya {
namespace {

using testing::random_tokens;
using testing::same_bits;
using testing::step_logits;

// A smaller draft: 2 blocks of width 32, another padding of the same 300 ids.
ZayaConfig draft_test_config() {
  ZayaConfig c = testing::small_test_config();
  c.hidden = 32;
  c.num_blocks = 2;
  c.vocab_size = 304;
  c.q_heads = 2;
  c.head_dim = 16;
  c.expert_ffn = 32;
  c.router_hidden = 16;
  return c;
}

// Each step of both runs is decode-only (every request of a batch starts in the
// first step; batch 1 runs its requests one after another, each drafter slot
// starting over), so every target row runs the decode kernels: the same bits,
// the same argmax. Drafts: the target's own weights (f32: drafts agree almost
// always) and a smaller random model (they rarely do).
TEST(SpecModel, GreedyEqualsPlainGreedyTokenForToken) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 44);
  auto other = testing::random_model(draft_test_config(), 45);
  auto self_draft = InferModel::from_model(*model);
  auto other_draft = InferModel::from_model(*other);
  SpecCounts seen_self, seen_other;
  for (const char* dtype : {"f32", "bf16", "int8"}) {
    auto im = std::string(dtype) == "f32" ? InferModel::from_model(*model) : InferModel::from_model(*model, dtype);
    for (int64_t batch : {1, 3, 5}) {
      std::vector<GenerationRequest> reqs =
          testing::repetitive_requests(c, batch == 1 ? 6 : batch, 70 + uint64_t(batch));
      GeneratorOptions plain;
      plain.max_batch = batch;
      const auto ref = generate(*im, reqs, plain);
      reqs[0].stop_ids = {ref[0].tokens[12]};  // met late in one request: it ends inside an accepted run
      const auto ref_stop = generate(*im, reqs, plain);
      for (const InferModel* draft : {self_draft.get(), other_draft.get()}) {
        SpecOptions spec;
        spec.method = SpecMethod::kModel;
        spec.draft_model = draft;
        const bool self = draft == self_draft.get();
        testing::expect_speculative_greedy_equals(
            *im, reqs, plain, spec, ref_stop, self ? seen_self : seen_other,
            std::string(dtype) + " batch " + std::to_string(batch) + (self ? " self draft" : " other draft"));
      }
    }
  }
  // The target's own weights draft well; the other model's drafts are mostly rejected; both ways out happened.
  EXPECT_GT(seen_self.acceptance_rate(), 0.8);
  EXPECT_LT(seen_other.acceptance_rate(), 0.5);
  EXPECT_GT(seen_other.drafted, seen_other.accepted);
}

// A draft that rarely agrees, at batch 1: once the engine's pool says drafting
// does not pay, a new sequence does not probe (its first draft would catch the
// draft model up with the whole prompt) before it has gone kMaxPause steps
// without a draft, so later requests of 40 tokens never draft, and those of
// 150 do (the pool learns again); the text is plain greedy text.
TEST(SpecModel, NoPromptCatchUpForAProbeWhereNothingPays) {
  ZayaConfig c = testing::small_test_config(), dc = draft_test_config();
  c.max_position = dc.max_position = 256;  // room for kMaxPause steps
  auto model = testing::random_model(c, 44);
  auto other = testing::random_model(dc, 45);
  auto im = InferModel::from_model(*model);
  auto draft = InferModel::from_model(*other);
  for (int64_t tokens : {40, 150}) {
    std::vector<GenerationRequest> reqs = testing::repetitive_requests(c, 8, 90);
    for (GenerationRequest& r : reqs) r.max_new_tokens = tokens;  // 40: probes were due after kPause, 2 kPause
    GeneratorOptions o;
    o.max_batch = 1;
    const auto ref = generate(*im, reqs, o);
    o.spec.method = SpecMethod::kModel;
    o.spec.draft_model = draft.get();
    o.spec.tokens = 4;
    GenerationStats first, all;
    generate(*im, {reqs[0]}, o, {}, {}, &first);
    const auto got = generate(*im, reqs, o, {}, {}, &all);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].tokens, ref[i].tokens) << tokens << ", request " << i;
    EXPECT_GT(first.spec.drafts, 0) << tokens;                  // the first request drafts on the prior
    const int64_t later = all.spec.drafts - first.spec.drafts;  // the drafts of the 7 later requests
    if (tokens < DraftLength::kMaxPause)
      EXPECT_LT(later, 7);  // not one probe a request
    else
      EXPECT_GE(later, 7);  // one after kMaxPause steps at least
  }
}

// The distributions a never-drafted run of the draft model gives: `chunks` fed
// in order (each a step), the last chunk's last row, then one step per token of
// `then`; each row as the drafter records it (sampled under `so`, stride V).
std::vector<float> reference_q(const InferModel& draft, const std::vector<std::vector<int32_t>>& chunks,
                               const std::vector<int32_t>& then, const SamplingOptions& so, int64_t V, int64_t vocab) {
  EngineOptions eo;
  eo.max_context = 64;
  InferenceEngine e(draft, eo);
  std::vector<float> q;
  std::vector<std::pair<float, int32_t>> dist;
  auto add = [&] {
    const std::vector<float> l = step_logits(e);
    sampling_distribution(l.data() + (e.logit_rows() - 1) * e.config().vocab_size, vocab, so, dist);
    q.resize(q.size() + size_t(V), 0.0f);
    for (const auto& [p, id] : dist) q[q.size() - size_t(V) + size_t(id)] = p;
  };
  for (size_t i = 0; i < chunks.size(); ++i) {
    StepChunk ch{0, chunks[i].data(), int64_t(chunks[i].size()),
                 i + 1 == chunks.size() ? LogitsWanted::kLast : LogitsWanted::kNone};
    e.step({&ch, 1});
  }
  add();
  for (const int32_t& t : then) {
    StepChunk ch{0, &t, 1, LogitsWanted::kLast};
    e.step({&ch, 1});
    add();
  }
  return q;
}

// The drafter after a rejected draft, a fully accepted one and a new sequence
// in the slot: its distributions have the bits of a draft model that was only
// ever fed the emitted tokens, in the same chunks, and the scratch slot leaves
// no page behind.
TEST(SpecModel, DraftStateAfterRejectionsIsANeverDraftedRun) {
  const ZayaConfig c = testing::small_test_config();
  auto target_model = testing::random_model(c, 51);
  auto draft_model = testing::random_model(draft_test_config(), 52);
  auto target = InferModel::from_model(*target_model);
  auto draft = InferModel::from_model(*draft_model);
  EngineOptions to;
  to.max_sequences = 2;
  to.max_context = 64;
  InferenceEngine target_engine(*target, to);
  const int64_t V = c.vocab_size, vocab = c.real_vocab_size;
  ModelDrafter drafter(*draft, target_engine, vocab);
  const SamplingOptions so{.temperature = 1.0, .top_k = 0, .top_p = 1.0};
  Rng rng{9, 1, 0};
  std::vector<int32_t> tokens;
  std::vector<float> q;
  auto run = [&](const std::vector<int32_t>& context, int64_t k) {
    const DraftJob job{1, context, k, &so, &rng, &tokens, &q};
    drafter.draft({&job, 1});
    EXPECT_EQ(int64_t(tokens.size()), k);
    EXPECT_EQ(q.size(), tokens.size() * size_t(V));
    const InferenceEngine& e = drafter.engine();
    EXPECT_EQ(e.length(1), int64_t(context.size()));  // the context, never a draft token
    EXPECT_EQ(e.length(3), 0);                        // the scratch slot is empty again
    for (int64_t kind = 0; kind < e.kv_kinds(); ++kind)
      EXPECT_EQ(e.pool_pages(kind) - e.free_pages(kind), e.pages_held(1)[size_t(kind)]) << "pages left behind";
  };
  drafter.start(1);
  const std::vector<int32_t> prompt = random_tokens(9, vocab, 3);
  run(prompt, 4);
  EXPECT_TRUE(same_bits(q, reference_q(*draft, {prompt}, {tokens.begin(), tokens.end() - 1}, so, V, vocab)));
  // The target kept d1 and rejected d2 (its own token X instead): the draft model never saw d2 .. d4.
  const std::vector<int32_t> d = tokens;
  const int32_t x = int32_t((d[1] + 1) % vocab);
  std::vector<int32_t> context = prompt;
  context.insert(context.end(), {d[0], x});
  run(context, 3);
  std::vector<float> want = reference_q(*draft, {prompt, {d[0], x}}, {tokens.begin(), tokens.end() - 1}, so, V, vocab);
  EXPECT_TRUE(same_bits(q, want)) << "after a rejection";
  // A fully accepted draft and the target's next token: the catch-up feeds all four.
  const std::vector<int32_t> e = tokens;
  std::vector<int32_t> caught = e;
  caught.push_back(7);
  context.insert(context.end(), caught.begin(), caught.end());
  run(context, 2);
  want = reference_q(*draft, {prompt, {d[0], x}, caught}, {tokens.begin(), tokens.end() - 1}, so, V, vocab);
  EXPECT_TRUE(same_bits(q, want)) << "after a full acceptance";
  // A new sequence in the slot starts from nothing.
  drafter.start(1);
  const std::vector<int32_t> other = random_tokens(5, vocab, 4);
  run(other, 3);
  EXPECT_TRUE(same_bits(q, reference_q(*draft, {other}, {tokens.begin(), tokens.end() - 1}, so, V, vocab)));
  // Greedy drafts draw nothing and are the argmax rows (point masses).
  const SamplingOptions greedy{.temperature = 0};
  const uint64_t before = rng.counter;
  const DraftJob job{1, other, 3, &greedy, &rng, &tokens, &q};
  drafter.start(1);
  drafter.draft({&job, 1});
  EXPECT_EQ(rng.counter, before);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(q[i * size_t(V) + size_t(tokens[i])], 1.0f);
}

// Three tokens sampled over 3 ids with drafts from another model (its own q):
// their joint frequencies against the target's p(t1) p(t2|t1) p(t3|t1 t2).
TEST(SpecModel, SampledTokensFollowTheTargetDistribution) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 47);
  auto other = testing::random_model(draft_test_config(), 48);
  auto im = InferModel::from_model(*model);
  auto draft = InferModel::from_model(*other);
  GeneratorOptions go;
  go.max_batch = 16;
  go.spec.method = SpecMethod::kModel;
  go.spec.draft_model = draft.get();
  go.spec.tokens = 2;
  go.spec.adaptive = false;
  const GenerationStats st = testing::expect_three_tokens_follow_the_model(
      *im, go, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {.temperature = 1.5, .top_k = 0, .top_p = 1.0}, 3, 2000);
  EXPECT_GT(st.spec.drafts, 1000);
  EXPECT_GT(st.spec.accepted, 0);
  EXPECT_LT(st.spec.accepted, st.spec.drafted);
}

// A second 400-piece tokenizer: the same training on other text (different pieces).
const std::string& other_tokenizer_path() {
  static testing::TempDir dir;
  static std::string model = [] {
    const std::string all = testing::kjv_slice(600'000);
    const std::string corpus = dir.file("other.txt");
    testing::write_file(corpus, all.substr(all.size() / 2));
    TokenizerTrainOptions o;
    o.corpus.inputs = {corpus};
    o.output_prefix = dir.file("other");
    o.vocab_size = 400;
    o.model_type = "unigram";
    Tokenizer::train(o);
    return o.output_prefix + ".model";
  }();
  return model;
}

// Bad --spec-model input: a missing directory, another tokenizer (pieces), a
// tokenizer of another size, no tokenizer and another vocabulary, fewer ids
// than the target samples; each error names both models and the mismatch.
TEST(SpecModel, IncompatibleDraftModelsFailNamingBoth) {
  ZayaConfig c = testing::small_test_config();
  c.vocab_size = 416;
  c.real_vocab_size = 400;
  auto model = testing::random_model(c, 60);
  auto target = InferModel::from_model(*model);
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  testing::expect_error(
      [&] { open_draft_model("/nonexistent/draft", {}, *target, "target_dir", tok, 400); },
      "--spec-model /nonexistent/draft: no such file or directory (the draft model: a model directory, training "
      "checkpoint or .gguf file with the target target_dir's tokenizer)");
  // A model directory with the other tokenizer beside it.
  testing::TempDir dir;
  save_hf_model(*model, dir.path());
  std::filesystem::copy_file(other_tokenizer_path(), dir.file("tokenizer.model"));
  testing::expect_error([&] { open_draft_model(dir.path(), {}, *target, "target_dir", tok, 400); },
                        "--spec-model " + dir.path() + ": its tokenizer (" + dir.file("tokenizer.model") +
                            ") differs from the target target_dir's (" + testing::small_tokenizer_path() + "): id ");
  // The same tokenizer: it opens.
  std::filesystem::copy_file(testing::small_tokenizer_path(), dir.file("tokenizer.model"),
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(open_draft_model(dir.path(), {}, *target, "target_dir", tok, 400)->config().real_vocab_size, 400);
  // check_draft_model alone: a tokenizer of another size; none and another vocabulary; too few ids.
  ZayaConfig small = c;
  small.real_vocab_size = 380;
  auto fewer = testing::random_model(small, 61);
  auto fewer_im = InferModel::from_model(*fewer);
  testing::expect_error([&] { check_draft_model(*target, "T", tok, *fewer_im, "D", nullptr, 400); },
                        "--spec-model D: it has no tokenizer of its own (tokenizer.model), and its vocabulary (380 "
                        "ids, BOS 2, EOS 1) differs from the target T's (400 ids, BOS 2, EOS 1)");
  testing::expect_error([&] { check_draft_model(*target, "T", tok, *target, "D", nullptr, 401); },
                        "--spec-model D: its vocabulary has 400 ids (real_vocab_size), fewer than the 401 the target "
                        "T samples");
  testing::TempDir tdir;
  testing::write_file(tdir.file("c.txt"), testing::kjv_slice(100'000));
  TokenizerTrainOptions to;
  to.corpus.inputs = {tdir.file("c.txt")};
  to.output_prefix = tdir.file("t360");
  to.vocab_size = 360;
  Tokenizer::train(to);
  const Tokenizer t360 = Tokenizer::load(to.output_prefix + ".model");
  testing::expect_error([&] { check_draft_model(*target, "T", tok, *target, "D", &t360, 400); },
                        "--spec-model D: its tokenizer (" + to.output_prefix +
                            ".model) has 360 pieces, the target T's (" + testing::small_tokenizer_path() + ") has 400");
  // `--spec model` needs the model; --spec-model cannot go with --spec ngram.
  SpecOptions so;
  so.method = SpecMethod::kModel;
  testing::expect_error([&] { so.validate(); }, "--spec model needs the draft model: --spec-model DIR");
  so.method = SpecMethod::kNgram;
  testing::expect_error([&] { open_spec_model_flag(so, dir.path(), {}, *target, "T", tok, 400); },
                        "--spec-model drafts with a model; it cannot be combined with --spec ngram");
  so.method = SpecMethod::kNone;
  auto opened = open_spec_model_flag(so, dir.path(), {}, *target, "T", tok, 400);
  EXPECT_EQ(so.method, SpecMethod::kModel);
  EXPECT_EQ(so.draft_model, opened.get());
}

}  // namespace
}  // namespace zaya
