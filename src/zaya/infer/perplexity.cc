#include "zaya/infer/perplexity.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/data/corpus.h"
#include "zaya/data/loss_mask.h"
#include "zaya/data/shard_reader.h"

namespace zaya {

double PerplexityResult::perplexity() const { return std::exp(mean_nll()); }

double PerplexityResult::bits_per_byte(int64_t bytes) const {
  return bytes > 0 ? nll / std::log(2.0) / double(bytes) : 0.0;
}

std::vector<ScoreGroup> perplexity_windows(const std::vector<int32_t>& doc, int64_t context, int64_t stride) {
  ZAYA_CHECK(context >= 2, "perplexity window {} is invalid; allowed: >= 2 tokens", context);
  ZAYA_CHECK(stride >= 1 && stride < context,
             "perplexity stride {} is invalid; allowed: 1..{} (new tokens per window, below the window {})", stride,
             context - 1, context);
  std::vector<ScoreGroup> out;
  const int64_t n = int64_t(doc.size());
  // Targets [t0, t1) of each window, with as much context before t0 as the window holds.
  for (int64_t t0 = 1; t0 < n;) {
    const int64_t t1 = std::min(n, t0 == 1 ? context : t0 + stride);
    const int64_t begin = std::max<int64_t>(0, t1 - context);
    ScoreGroup g;
    g.prefix.assign(doc.begin() + begin, doc.begin() + t0);
    g.continuations.emplace_back(doc.begin() + t0, doc.begin() + t1);
    out.push_back(std::move(g));
    t0 = t1;
  }
  return out;
}

std::vector<ScoreGroup> perplexity_windows(const std::vector<int32_t>& doc, const std::vector<uint8_t>& mask,
                                           int64_t context, int64_t stride) {
  ZAYA_CHECK(mask.size() == doc.size(), "a loss mask of {} tokens for a document of {}", mask.size(), doc.size());
  std::vector<ScoreGroup> out;
  // The windows' targets are contiguous: tokens 1, 2, ... of the document.
  size_t t0 = 1;
  for (ScoreGroup& g : perplexity_windows(doc, context, stride)) {
    const size_t t1 = t0 + g.continuations[0].size();
    std::vector<uint8_t> counted(mask.begin() + std::ptrdiff_t(t0), mask.begin() + std::ptrdiff_t(t1));
    t0 = t1;
    if (std::find(counted.begin(), counted.end(), uint8_t{1}) == counted.end()) continue;
    g.counted.push_back(std::move(counted));
    out.push_back(std::move(g));
  }
  return out;
}

PerplexityResult perplexity(const InferModel& model, const std::vector<std::vector<int32_t>>& docs,
                            const PerplexityOptions& o, const std::function<void(size_t, size_t)>& progress) {
  return perplexity(model, docs, {}, o, progress);
}

int64_t perplexity_context(const ZayaConfig& config, int64_t requested) {
  return requested > 0 ? requested : std::min<int64_t>(config.max_position, 2048);
}

PerplexityResult perplexity(const InferModel& model, const std::vector<std::vector<int32_t>>& docs,
                            const std::vector<std::vector<uint8_t>>& loss_masks, const PerplexityOptions& o,
                            const std::function<void(size_t, size_t)>& progress) {
  ZAYA_CHECK(loss_masks.empty() || loss_masks.size() == docs.size(), "{} loss masks for {} documents",
             loss_masks.size(), docs.size());
  const ZayaConfig& c = model.config();
  const int64_t context = perplexity_context(c, o.context);
  ZAYA_CHECK(context <= c.max_position, "--context {} exceeds max_position_embeddings {}", context, c.max_position);
  const int64_t stride = o.stride > 0 ? o.stride : context - 1;
  std::vector<ScoreGroup> groups;
  PerplexityResult r;
  for (size_t d = 0; d < docs.size(); ++d) {
    if (docs[d].size() < 2) continue;
    ++r.documents;
    for (ScoreGroup& g : loss_masks.empty() ? perplexity_windows(docs[d], context, stride)
                                            : perplexity_windows(docs[d], loss_masks[d], context, stride))
      groups.push_back(std::move(g));
  }
  r.windows = int64_t(groups.size());
  const auto scores = score_groups(model, groups, o.scorer, progress);
  for (const auto& s : scores) {
    r.tokens += s[0].tokens;
    r.nll -= s[0].logprob;
  }
  return r;
}

ShardDocuments shard_documents(const std::string& prefix, int64_t model_vocab, int64_t max_documents,
                               int64_t max_tokens, bool apply_loss_mask) {
  ShardReadOptions ro;
  ro.loss_mask = apply_loss_mask;
  ShardReader shard = ShardReader::open(prefix, ro);
  ZAYA_CHECK(int64_t(shard.vocab_size()) <= model_vocab,
             "{}.idx: the shard was tokenized with {} ids but the model has {} (vocab_size); wrong tokenizer?", prefix,
             shard.vocab_size(), model_vocab);
  ShardDocuments out;
  std::error_code ec;
  if (std::filesystem::exists(loss_mask_path(prefix), ec)) out.mask.path = loss_mask_path(prefix);
  out.mask.applied = shard.has_loss_mask();
  int64_t tokens = 0;
  for (uint64_t d = 0; d < shard.num_documents(); ++d) {
    if (max_documents > 0 && int64_t(out.docs.size()) >= max_documents) break;
    if (max_tokens > 0 && tokens >= max_tokens) break;
    auto doc = shard.document(d);
    std::vector<int32_t> ids(doc.size());
    for (size_t i = 0; i < doc.size(); ++i) {
      ZAYA_CHECK(doc[i] < uint32_t(model_vocab), "{}.bin: document {} token {} is {}, outside the vocabulary 0..{}",
                 prefix, d, i, doc[i], model_vocab - 1);
      ids[i] = int32_t(doc[i]);
    }
    if (out.mask.applied) {
      // Token i of the document is token offsets[d] + i of the shard, the index the mask (and the sampler) uses.
      std::vector<uint8_t> bits(doc.size());
      for (size_t i = 0; i < doc.size(); ++i) bits[i] = shard.loss_selected(shard.offsets()[d] + i) ? 1 : 0;
      out.mask.selected += std::count(bits.begin(), bits.end(), uint8_t{1});
      out.loss_masks.push_back(std::move(bits));
    }
    tokens += int64_t(ids.size());
    out.docs.push_back(std::move(ids));
  }
  out.mask.tokens = tokens;
  return out;
}

std::vector<std::vector<int32_t>> text_documents(const std::string& path, const Tokenizer& tok, int64_t max_documents,
                                                 int64_t max_tokens, int64_t* bytes) {
  ZAYA_CHECK(tok.bos_id() >= 0 && tok.eos_id() >= 0, "{}: the tokenizer defines no BOS/EOS ids", tok.model_path());
  CorpusReader reader(path);
  CorpusDocument doc;
  std::vector<std::vector<int32_t>> out;
  int64_t tokens = 0;
  while (reader.next(doc)) {
    if (max_documents > 0 && int64_t(out.size()) >= max_documents) break;
    if (max_tokens > 0 && tokens >= max_tokens) break;
    std::vector<int32_t> ids = {tok.bos_id()};
    for (int32_t id : tok.encode(doc.text)) ids.push_back(id);
    ids.push_back(tok.eos_id());
    if (bytes != nullptr) *bytes += int64_t(doc.text.size());
    tokens += int64_t(ids.size());
    out.push_back(std::move(ids));
  }
  ZAYA_CHECK(!out.empty(), "{}: no documents (text separated by blank lines)", path);
  return out;
}

}  // namespace zaya
