// A probe of the layer rules (tests/CMakeLists.txt): the file formats sit
// above the model, so compiled as part of the model layer this must fail
// (layers.model_reaching_formats_does_not_compile); compiled as part of the
// formats layer it must build (layers.formats_reaching_model_compiles).
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/model/model.h"

int zaya_layer_probe_formats() { return 0; }
