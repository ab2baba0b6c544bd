// Registration point for a verb of the [bench] issue; the verb is not built yet, so
// nothing is registered and `zaya` does not offer it.
#include "zaya/cli/commands.h"

namespace zaya::cli {

void add_bench_membw_command(CLI::App& bench) { (void)bench; }

}  // namespace zaya::cli
