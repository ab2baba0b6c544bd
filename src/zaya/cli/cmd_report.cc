// Registration point for a verb of the [bench] issue; the verb is not built yet, so
// nothing is registered and `zaya` does not offer it.
#include "zaya/cli/commands.h"

namespace zaya::cli {

void add_report_command(CLI::App& app) { (void)app; }

}  // namespace zaya::cli
