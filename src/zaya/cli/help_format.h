#pragma once
// How `zaya ... --help` shows an option: its default as "[default: 0.8]" after
// the type (CLI11 writes "FLOAT=0.8"), nothing for an empty one ("", an empty
// list) or one whose description says it in words ("(default: measured)" for
// a 0 that means "measure it"), and "[alone: latest]" for the value of one
// given without a value. Set on the top app before any verb is added,
// so that every verb inherits it; main() also turns on capturing every option's default.

#include <CLI/CLI.hpp>
#include <string>

namespace zaya::cli {

class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override;
};

}  // namespace zaya::cli
