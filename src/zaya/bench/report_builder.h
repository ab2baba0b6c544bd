#pragma once
// `zaya report`: plots and one self-contained HTML page from the JSON files
// the other verbs write (bench comm / gemm / membw / io / train / infer, and
// the metrics.jsonl of zaya train). Each input is recognised by its "bench"
// key (or, for .jsonl, by lines with "step" and "loss"); plots are SVG,
// written next to index.html and also inlined in it, so the page needs no
// other file.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zaya {

struct ReportFigure {
  std::string file;  // e.g. "comm_all_reduce.svg"
  std::string title;
  std::string svg;  // the document
};

struct ReportSection {
  std::string id, title;
  std::string html;  // tables and notes (already escaped)
  std::vector<ReportFigure> figures;
};

struct ReportInput {
  std::string path;
  std::string kind;    // "comm", "gemm", "membw", "io", "train", "infer", "metrics", or "" (not recognised)
  nlohmann::json doc;  // metrics: an array of the lines
};

struct Report {
  std::string title;
  std::vector<ReportInput> inputs;
  std::vector<ReportSection> sections;
};

// Reads and classifies one input file; throws zaya::Error naming the file on bad JSON.
ReportInput load_report_input(const std::string& path);

// `title` empty: report_title(inputs).
Report build_report(const std::vector<ReportInput>& inputs, const std::string& title);

// A page title from what the inputs are: "zaya.cpp cluster characterization"
// when any is a comm, GEMM, memory or storage benchmark (or none is
// recognised); else "zaya.cpp training report: tiny" with runs of zaya train
// or zaya bench train (up to 3 run names, then how many more); else
// "zaya.cpp inference benchmark".
std::string report_title(const std::vector<ReportInput>& inputs);

// The sections, one per kind present (report_sections.cc; training, with the
// metrics of zaya train, in report_train.cc; inference in report_infer.cc).
ReportSection comm_report_section(const std::vector<const ReportInput*>& inputs);
ReportSection gemm_report_section(const std::vector<const ReportInput*>& inputs);
ReportSection membw_report_section(const std::vector<const ReportInput*>& inputs);
ReportSection io_report_section(const std::vector<const ReportInput*>& inputs);
ReportSection train_report_section(const std::vector<const ReportInput*>& inputs);
ReportSection infer_report_section(const std::vector<const ReportInput*>& inputs);

std::string render_report_html(const Report& report);
// Writes every figure and index.html into `out_dir` (created if missing); returns the files written.
std::vector<std::string> write_report(const Report& report, const std::string& out_dir);

// HTML helpers shared by the sections.
std::string html_escape(const std::string& text);
std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace zaya
