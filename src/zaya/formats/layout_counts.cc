#include "zaya/formats/layout_counts.h"

#include <set>
#include <string>

#include "zaya/formats/gguf_zaya_map.h"
#include "zaya/model/params.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

LayoutTensorCounts layout_tensor_counts(const ZayaConfig& c) {
  LayoutTensorCounts n;
  std::set<std::string> native;
  for (const ParamTable& table : {ParamTable(c, true), ParamTable(c, false)})
    for (const ParamEntry& e : table.entries()) {
      ++n.legacy;
      native.insert(native_tensor_ref(e.role, e.half_layer, e.expert, c).name);
    }
  n.native = int64_t(native.size());
  n.gguf = int64_t(zaya_gguf_tensor_map(c).size());
  return n;
}

}  // namespace zaya
