// The inference section of `zaya report` (report_builder.h), from
// `zaya bench infer --json`: decode ms per step (one token for each sequence)
// against the bandwidth roofline (bytes one step reads / STREAM bandwidth,
// measured in the same run), and prefill tokens/s per prompt length.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>

#include "zaya/bench/report_builder.h"
#include "zaya/bench/report_json.h"
#include "zaya/bench/report_plot.h"

namespace zaya {
namespace {

using nlohmann::json;

// Decode ms/step against the roofline for one file: a line per batch over the
// context lengths (or per context over the batch sizes, when there are more
// batch sizes than contexts), the DRAM roofline dashed in the same colour.
ReportFigure decode_figure(const ReportInput& in, const std::string& name) {
  std::set<double> batches, contexts;
  for (const json& p : json_array(in.doc, "decode")) {
    batches.insert(json_number(p, "batch"));
    contexts.insert(json_number(p, "context"));
  }
  const bool over_context = contexts.size() >= batches.size();
  std::map<double, PlotSeries> measured, roofline;
  for (const json& p : json_array(in.doc, "decode")) {
    const double line = over_context ? json_number(p, "batch") : json_number(p, "context"),
                 x = over_context ? json_number(p, "context") : json_number(p, "batch");
    const std::string what = over_context ? fmt::format("batch {:g}", line) : fmt::format("context {:g}", line);
    PlotSeries& m = measured[line];
    m.label = what;
    m.x.push_back(x);
    m.y.push_back(json_number(p, "ms_per_step"));
    PlotSeries& r = roofline[line];
    r.label = what + " roofline";
    r.style = LineStyle::kDashed;
    r.x.push_back(x);
    r.y.push_back(json_number(p, "roofline_ms"));
  }
  std::vector<PlotSeries> series;
  size_t i = 0;
  for (auto& [line, m] : measured) {
    m.color = roofline[line].color = palette_color(i++);
    series.push_back(m);
    series.push_back(roofline[line]);
  }
  const std::string title = fmt::format("decode ms per token vs the roofline: {} ({} weights, {:g} GB/s DRAM)", name,
                                        json_string(in.doc, "weights_dtype", "?"), json_number(in.doc, "dram_gbps"));
  return line_figure("infer_decode_" + file_slug(std::filesystem::path(in.path).stem().string()) + ".svg", title,
                     over_context ? "context (tokens)" : "batch (sequences)", "ms per decode step", AxisScale::kLog10,
                     AxisScale::kLog10, series);
}

}  // namespace

ReportSection infer_report_section(const std::vector<const ReportInput*>& inputs) {
  ReportSection sec;
  sec.id = "infer";
  sec.title = "Inference (zaya bench infer)";
  std::vector<std::vector<std::string>> runs, decode, prefill_rows;
  std::vector<PlotSeries> prefill;
  for (const ReportInput* in : inputs) {
    const json& d = in->doc;
    const std::string file = file_base_name(in->path), name = json_string(d, "model", file);
    runs.push_back({file, name, json_string(d, "weights_dtype", "?"), fixed(json_number(d, "threads"), 0),
                    d.value("bf16_activations", true) ? "bf16" : "f32", fixed(json_number(d, "dram_gbps"), 1),
                    fixed(json_number(d.value("weight_bytes", json::object()), "total") / 1e6, 1)});
    for (const json& p : json_array(d, "decode"))
      decode.push_back(
          {file, fixed(json_number(p, "batch"), 0), fixed(json_number(p, "context"), 0),
           fixed(json_number(p, "ms_per_step"), 3), fixed(json_number(p, "tokens_per_second"), 1),
           fixed(json_number(p, "bytes_per_step") / 1e6, 2), fixed(json_number(p, "roofline_ms"), 3),
           fixed(json_number(p, "ratio_to_roofline"), 2),
           json_number(p, "working_set_roofline_ms") > 0 ? fixed(json_number(p, "working_set_roofline_ms"), 3) : "-"});
    PlotSeries s{fmt::format("{} ({})", name, file), {}, {}};
    for (const json& p : json_array(d, "prefill")) {
      s.x.push_back(json_number(p, "tokens"));
      s.y.push_back(json_number(p, "tokens_per_second"));
      prefill_rows.push_back({file, fixed(json_number(p, "tokens"), 0), fixed(json_number(p, "seconds"), 4),
                              fixed(json_number(p, "tokens_per_second"), 0)});
    }
    if (!s.x.empty()) prefill.push_back(std::move(s));
    if (!json_array(d, "decode").empty()) sec.figures.push_back(decode_figure(*in, name));
  }
  sec.html =
      "<p>A decode step feeds one token to each of the batch's sequences, so its time is the time per token of "
      "every sequence. The roofline is the bytes the step reads (the dense weights, the experts its tokens "
      "chose, the LM head, the embedding rows and the KV cache) over the STREAM triad bandwidth measured in the "
      "same run (DRAM); the ratio is measured over roofline. The working-set roofline uses the bandwidth at "
      "the step's own size, the bound when the weights fit the cache.</p>\n" +
      html_table({"file", "model", "weights", "threads", "prefill activations", "DRAM GB/s", "weights (MB)"}, runs);
  if (!decode.empty())
    sec.html += html_table({"file", "batch", "context", "ms/step", "tokens/s", "MB/step", "roofline ms", "x roofline",
                            "working-set roofline ms"},
                           decode);
  if (!prefill_rows.empty()) sec.html += html_table({"file", "prompt tokens", "seconds", "tokens/s"}, prefill_rows);
  if (!prefill.empty())
    sec.figures.push_back(line_figure("infer_prefill.svg", "prefill throughput", "prompt length (tokens)", "tokens/s",
                                      AxisScale::kLog10, AxisScale::kLinear, prefill));
  return sec;
}

}  // namespace zaya
