// A probe of the layer rules (tests/CMakeLists.txt): compiled as part of the
// model layer it must fail, because the model may not use the training layer
// above it (layers.reaching_up_does_not_compile); compiled as part of the
// training layer it must build (layers.reaching_down_compiles).
#include "zaya/train/train_job.h"

int zaya_layer_probe() { return 0; }
