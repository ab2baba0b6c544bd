#include "zaya/cli/help_format.h"

namespace zaya::cli {

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  std::string out = CLI::Formatter::make_option_opts(opt);
  const std::string value = opt->get_default_str();
  if (value.empty() || !opt->get_option_text().empty() || opt->get_type_size() == 0) return out;
  const std::string written = "=" + value;  // CLI11 puts it right after the type name
  const size_t at = out.find(written);
  if (at == std::string::npos) return out;
  out.erase(at, written.size());
  // An empty list, or a default the description gives in words ("(default: measured)"): no number that misleads.
  if (value == "[]" || opt->get_description().find("(default") != std::string::npos) return out;
  // An option that may be given without a value (--resume): that is what the string is.
  out += opt->get_expected_min() == 0 ? " [alone: " + value + "]" : " [default: " + value + "]";
  return out;
}

}  // namespace zaya::cli
