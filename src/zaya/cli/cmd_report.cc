// zaya report: plots (SVG) and one self-contained HTML page from the JSON the
// other verbs write (src/zaya/bench/report_inputs.h, report_builder.h; docs/bench.md).
#include <fmt/format.h>

#include <memory>

#include "zaya/bench/report_builder.h"
#include "zaya/bench/report_inputs.h"
#include "zaya/cli/commands.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> inputs;
  std::string out = "report", title, json_out;  // title empty: from the content (report_title)
};

void report(const ReportOptions& o) {
  std::vector<ReportInput> inputs;
  for (const std::string& f : expand_report_inputs(o.inputs)) inputs.push_back(load_report_input(f));
  const Report r = build_report(inputs, o.title);
  const std::vector<std::string> written = write_report(r, o.out);
  fmt::print("zaya report: {} input file(s), {} section(s)\n", inputs.size(), r.sections.size());
  for (const ReportInput& in : inputs) fmt::print("  {:<10} {}\n", in.kind.empty() ? "(ignored)" : in.kind, in.path);
  for (const ReportSection& s : r.sections) fmt::print("  section {:<8} {} figure(s)\n", s.id, s.figures.size());
  fmt::print("wrote {} files; open {}\n", written.size(), written.back());
  if (!o.json_out.empty()) write_file_atomic(o.json_out, report_summary_json(o.out, written, inputs).dump(2) + "\n");
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand("report", "plots and an HTML page from benchmark JSON files and training runs");
  cmd->add_option("inputs", o->inputs,
                  "JSON files of zaya bench comm/gemm/membw/io/train/infer, metrics.jsonl of zaya train, or "
                  "directories (a run's directory stands for its metrics.jsonl)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--out", o->out, "output directory for the SVG files and index.html");
  cmd->add_option("--title", o->title,
                  "page title (default: from the content: \"zaya.cpp training report: RUN\" for training runs, "
                  "\"zaya.cpp cluster characterization\" for cluster benchmarks)");
  cmd->add_option("--json", o->json_out, "write the list of inputs and outputs as JSON");
  cmd->callback([o] { report(*o); });
}

}  // namespace zaya::cli
