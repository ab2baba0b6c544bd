// Registration point for a verb of the [infer] issue; the verb is not built yet, so
// nothing is registered and `zaya` does not offer it.
#include "zaya/cli/commands.h"

namespace zaya::cli {

void add_eval_command(CLI::App& app) { (void)app; }

}  // namespace zaya::cli
