#include "zaya/train/final_weights.h"

#include <map>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/dist/comm.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/formats/model_directory.h"

namespace zaya {

void save_final_weights(const ZayaModel& model, const ZayaConfig& config, ProcessMesh& mesh, const std::string& dir,
                        const std::string& dtype, DirectoryLayout layout) {
  HfSaveOptions save;
  save.dtype = dtype;
  if (layout == DirectoryLayout::kNative) {
    // Every rank holds every balancing bias, so all refuse alike.
    const std::string why = native_export_problem(config, model.buffers(), model.buffer_data(), "the trained model");
    ZAYA_CHECK(why.empty(),
               "train.save_layout = \"native\": {}; {} is not written (the run's checkpoints hold the weights: "
               "`zaya ckpt export --in CHECKPOINTS --out DIR` writes the legacy layout)",
               why, dir);
  }
  const bool root = mesh.rank() == 0;
  if (mesh.ep_size() == 1) {
    if (root) save_model_directory(config, complete_model_tensors(model), dir, layout, save);
    return;
  }
  // Expert parallel: gather every rank's expert region within its ep group
  // (collective on all ranks); rank 0 writes dense tensors and all experts.
  const ParamTable& mine = model.params();
  const int64_t dense = mine.dense_floats(), region = mine.total_floats() - dense;
  std::vector<float> gathered(size_t(region) * size_t(mesh.ep_size()));
  std::vector<int64_t> counts(size_t(mesh.ep_size()), region);
  mesh.ep().all_gather_v(model.param_data() + dense, gathered.data(), counts.data(), DType::kF32);
  if (!root) return;
  // Where every tensor is now, then the canonical order of a full table.
  std::map<std::string, const float*> where;
  for (const ParamEntry& e : mine.entries())
    if (e.offset < dense) where[e.name] = model.param_data() + e.offset;
  const int64_t local = config.experts / mesh.ep_size();
  for (int r = 0; r < mesh.ep_size(); ++r) {
    const ParamTable table(config, true, ExpertRange{r * local, local});
    for (const ParamEntry& e : table.entries())
      if (e.offset >= dense) where[e.name] = gathered.data() + r * region + (e.offset - dense);
  }
  std::vector<NamedTensor> tensors;
  const ParamTable full(config, true);
  for (const ParamEntry& e : full.entries()) tensors.push_back({e.name, e.shape, where.at(e.name), false});
  for (const ParamEntry& e : model.buffers().entries())
    tensors.push_back({e.name, e.shape, model.buffer_data() + e.offset, true});
  save_model_directory(config, tensors, dir, layout, save);
}

}  // namespace zaya
