#include "zaya/bench/report_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zaya/bench/report_metrics.h"
#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/report/svg_text.h"

namespace zaya {

std::string html_escape(const std::string& text) { return xml_escape(text); }

std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table>\n<tr>";
  for (const std::string& h : header) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const std::string& cell : row) out += "<td>" + html_escape(cell) + "</td>";
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

ReportInput load_report_input(const std::string& path) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "{}: cannot open", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  ReportInput r;
  r.path = path;
  const bool jsonl = path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  if (jsonl) {
    r.doc = nlohmann::json::array();
    for_each_json_line(text, path, [&](nlohmann::json&& j, const std::string&) {
      r.doc.push_back(std::move(j));
      return true;
    });
    for (const auto& j : r.doc)
      if (j.is_object() && j.contains("step") && j.contains("loss")) r.kind = "metrics";
    return r;
  }
  r.doc = parse_json(text, path);
  if (r.doc.is_object() && r.doc.contains("bench") && r.doc["bench"].is_string()) {
    const std::string b = r.doc["bench"].get<std::string>();
    if (b == "comm" || b == "gemm" || b == "membw" || b == "io" || b == "train" || b == "infer") r.kind = b;
  }
  return r;
}

std::string report_title(const std::vector<ReportInput>& inputs) {
  std::vector<std::string> runs;
  bool training = false, inference = false, cluster = false;
  for (const ReportInput& in : inputs) {
    if (in.kind == "metrics") runs.push_back(run_label(in.path));
    training = training || in.kind == "metrics" || in.kind == "train";
    inference = inference || in.kind == "infer";
    cluster = cluster || in.kind == "comm" || in.kind == "gemm" || in.kind == "membw" || in.kind == "io";
  }
  if (training && !cluster) {
    if (runs.empty()) return "zaya.cpp training report";
    const size_t shown = std::min<size_t>(runs.size(), 3);
    std::string names;
    for (size_t i = 0; i < shown; ++i) names += (i ? ", " : "") + runs[i];
    if (runs.size() > shown) names += fmt::format(" and {} more", runs.size() - shown);
    return "zaya.cpp training report: " + names;
  }
  if (inference && !cluster) return "zaya.cpp inference benchmark";
  return "zaya.cpp cluster characterization";
}

Report build_report(const std::vector<ReportInput>& inputs, const std::string& title) {
  Report report;
  report.title = title.empty() ? report_title(inputs) : title;
  report.inputs = inputs;
  auto of_kind = [&](const std::string& kind) {
    std::vector<const ReportInput*> out;
    for (const ReportInput& in : report.inputs)
      if (in.kind == kind) out.push_back(&in);
    return out;
  };
  // A malformed document names the files of its kind instead of failing anonymously.
  auto add = [&](const std::vector<const ReportInput*>& v,
                 ReportSection (*make)(const std::vector<const ReportInput*>&)) {
    if (v.empty()) return;
    try {
      report.sections.push_back(make(v));
    } catch (const std::exception& e) {
      std::string files;
      for (const ReportInput* in : v) files += (files.empty() ? "" : ", ") + in->path;
      fail("zaya report: cannot read {}: {}", files, e.what());
    }
  };
  add(of_kind("comm"), comm_report_section);
  add(of_kind("gemm"), gemm_report_section);
  add(of_kind("membw"), membw_report_section);
  add(of_kind("io"), io_report_section);
  std::vector<const ReportInput*> train = of_kind("train"), metrics = of_kind("metrics");
  train.insert(train.end(), metrics.begin(), metrics.end());
  add(train, train_report_section);
  add(of_kind("infer"), infer_report_section);
  return report;
}

namespace {

// The SVG element without the XML declaration, for inlining in HTML.
std::string inline_svg(const std::string& svg) {
  const size_t start = svg.find("<svg");
  return start == std::string::npos ? svg : svg.substr(start);
}

std::string machine_line(const nlohmann::json& m) {
  if (!m.is_object()) return "";
  auto text = [&](const char* key) { return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : "?"; };
  auto number = [&](const char* key) { return m.contains(key) && m[key].is_number() ? m[key].get<double>() : 0.0; };
  return fmt::format("{} on {}: {:.0f} logical CPUs, {:.1f} GiB, oneDNN ISA {}", text("cpu"), text("host"),
                     number("logical_cpus"), number("memory_gib"), text("isa"));
}

}  // namespace

std::string render_report_html(const Report& r) {
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + html_escape(r.title) +
         "</title>\n<style>\n"
         "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\n"
         "h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\n"
         "table{border-collapse:collapse;margin:1em 0;font-size:.9em}"
         "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
         "th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\n"
         "figure{margin:1.5em 0}figcaption{color:#555;font-size:.9em}svg{max-width:100%;height:auto}\n"
         "nav a{margin-right:1em}.note{color:#555}\n</style>\n</head>\n<body>\n";
  out += "<h1>" + html_escape(r.title) + "</h1>\n";
  std::string machine;
  for (const ReportInput& in : r.inputs)
    if (in.doc.is_object() && in.doc.contains("machine")) {
      machine = machine_line(in.doc["machine"]);
      break;
    }
  if (!machine.empty()) out += "<p>" + html_escape(machine) + "</p>\n";
  if (!r.sections.empty()) {
    out += "<nav>";
    for (const ReportSection& s : r.sections) out += "<a href=\"#" + s.id + "\">" + html_escape(s.title) + "</a>";
    out += "</nav>\n";
  }
  for (const ReportSection& s : r.sections) {
    out += "<h2 id=\"" + s.id + "\">" + html_escape(s.title) + "</h2>\n" + s.html;
    for (const ReportFigure& f : s.figures)
      out += "<figure>\n" + inline_svg(f.svg) + "<figcaption>" + html_escape(f.title) + " (" + html_escape(f.file) +
             ")</figcaption>\n</figure>\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const ReportInput& in : r.inputs) rows.push_back({in.path, in.kind.empty() ? "not recognised" : in.kind});
  out += "<h2 id=\"inputs\">Inputs</h2>\n" + html_table({"file", "kind"}, rows);
  out += "<p class=\"note\">Written by zaya report. Formats: docs/bench.md.</p>\n</body>\n</html>\n";
  return out;
}

std::vector<std::string> write_report(const Report& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZAYA_CHECK(std::filesystem::is_directory(dir), "--out '{}': cannot create the directory: {}", dir, ec.message());
  std::vector<std::string> written;
  for (const ReportSection& s : r.sections)
    for (const ReportFigure& f : s.figures) {
      const std::string path = (std::filesystem::path(dir) / f.file).string();
      write_file_atomic(path, f.svg);
      written.push_back(path);
    }
  const std::string index = (std::filesystem::path(dir) / "index.html").string();
  write_file_atomic(index, render_report_html(r));
  written.push_back(index);
  return written;
}

}  // namespace zaya
