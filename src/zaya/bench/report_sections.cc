// The sections of `zaya report` for bench comm, gemm, membw and io (report_builder.h;
// training in report_train.cc, inference in report_infer.cc).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "zaya/bench/byte_size.h"
#include "zaya/bench/report_builder.h"
#include "zaya/bench/report_json.h"
#include "zaya/bench/report_plot.h"
#include "zaya/report/svg_heatmap.h"
#include "zaya/report/svg_line_plot.h"

namespace zaya {
namespace {

using nlohmann::json;

using Series = PlotSeries;

// Labels must tell the series apart: add the file name where two coincide.
void disambiguate(std::vector<Series>& series, const std::vector<std::string>& files) {
  std::map<std::string, int> count;
  for (const Series& s : series) ++count[s.label];
  for (size_t i = 0; i < series.size(); ++i)
    if (count[series[i].label] > 1) series[i].label += " [" + file_base_name(files[i]) + "]";
}

// "<stem>..." when the file's name already says what it is (gemm.json), else "<kind>_<stem>...".
std::string figure_stem(const std::string& kind, const std::string& path) {
  const std::string stem = file_slug(std::filesystem::path(path).stem().string());
  return stem.rfind(kind, 0) == 0 ? stem : kind + "_" + stem;
}

}  // namespace

ReportSection comm_report_section(const std::vector<const ReportInput*>& inputs) {
  ReportSection sec;
  sec.id = "comm";
  sec.title = "Collectives (zaya bench comm)";
  std::map<std::string, std::pair<std::vector<Series>, std::vector<std::string>>> by_coll;
  std::map<int, std::pair<std::vector<Series>, std::vector<std::string>>> by_ranks;
  std::vector<std::vector<std::string>> rows;
  for (const ReportInput* in : inputs) {
    const json& cfg = in->doc.value("config", json::object());
    const int groups = int(json_number(cfg, "groups", 1));
    const std::string split = json_string(cfg, "split");
    for (const json& run : in->doc.value("runs", json::array())) {
      const std::string coll = json_string(run, "collective", "?"), dtype = json_string(run, "dtype"),
                        op = json_string(run, "op");
      const int ranks = int(json_number(run, "ranks", 1));
      std::string label = fmt::format("{} rank{}", ranks, ranks == 1 ? "" : "s");
      if (groups > 1) label += fmt::format(" x {} groups ({})", groups, split);
      if (dtype != "float") label += " " + dtype;
      if (op != "sum" && op != "none") label += " " + op;
      Series s{label, {}, {}};
      double peak = 0, peak_size = 0, first_time = -1;
      int64_t wrong = 0;
      bool verified = false;
      for (const json& row : run.value("rows", json::array())) {
        const json& oop = row.value("out_of_place", json());
        const json& sample = oop.is_object() ? oop : row.value("in_place", json());
        if (!sample.is_object()) continue;
        const double size = json_number(row, "size"), busbw = json_number(sample, "busbw_gbps");
        if (size > 0) {
          s.x.push_back(size);
          s.y.push_back(busbw);
        }
        if (busbw > peak) {
          peak = busbw;
          peak_size = size;
        }
        if (first_time < 0) first_time = json_number(sample, "time_us");
        for (const char* form : {"out_of_place", "in_place"}) {
          const json& x = row.value(form, json());
          if (x.is_object() && x.contains("wrong") && x["wrong"].is_number()) {
            verified = true;
            wrong += x["wrong"].get<int64_t>();
          }
        }
      }
      by_coll[coll].first.push_back(s);
      by_coll[coll].second.push_back(in->path);
      if (groups == 1 && dtype == "float") {
        by_ranks[ranks].first.push_back({coll, s.x, s.y});
        by_ranks[ranks].second.push_back(in->path);
      }
      rows.push_back({file_base_name(in->path), coll, dtype, op, std::to_string(ranks), std::to_string(groups),
                      fixed(peak, 2), format_bytes(peak_size), fixed(first_time, 2),
                      verified ? std::to_string(wrong) : "not verified"});
    }
  }
  sec.html =
      "<p>Bus bandwidth as nccl-tests defines it (algbw times 2(n-1)/n for all-reduce, (n-1)/n for "
      "reduce-scatter, all-gather and all-to-all, 1 otherwise), out-of-place where the collective has that "
      "form. Peak is the best busbw over the sizes; latency is the time at the smallest size.</p>\n" +
      html_table({"file", "collective", "dtype", "op", "ranks", "groups", "peak busbw (GB/s)", "at size",
                  "smallest-size time (us)", "#wrong"},
                 rows);
  for (auto& [coll, v] : by_coll) {
    disambiguate(v.first, v.second);
    sec.figures.push_back(line_figure("comm_" + file_slug(coll) + ".svg", coll + ": bus bandwidth vs message size",
                                      "message size (bytes)", "busbw (GB/s)", AxisScale::kLog10, AxisScale::kLinear,
                                      v.first));
  }
  for (auto& [ranks, v] : by_ranks) {
    disambiguate(v.first, v.second);
    sec.figures.push_back(line_figure(fmt::format("comm_overview_{}ranks.svg", ranks),
                                      fmt::format("all collectives on {} ranks (float)", ranks), "message size (bytes)",
                                      "busbw (GB/s)", AxisScale::kLog10, AxisScale::kLinear, v.first));
  }
  return sec;
}

ReportSection gemm_report_section(const std::vector<const ReportInput*>& inputs) {
  ReportSection sec;
  sec.id = "gemm";
  sec.title = "GEMM efficiency (zaya bench gemm)";
  std::vector<std::vector<std::string>> peaks, falloffs, models;
  for (const ReportInput* in : inputs) {
    const json& d = in->doc;
    const json peaks_of = d.value("peak_gflops", json::object());  // .items() must not outlive it
    for (const auto& [dtype, peak_json] : peaks_of.items()) {
      const double peak = peak_json.is_number() ? peak_json.get<double>() : 0;
      peaks.push_back({file_base_name(in->path), dtype, fixed(peak, 1), fixed(json_number(d, "membw_gbps"), 1),
                       fixed(json_number(d, "membw_gbps") > 0 ? peak / json_number(d, "membw_gbps") : 0, 1)});
    }
    const json& entries = d.value("entries", json::array());
    for (const json& e : entries)
      if (e.value("falls_off", false) && falloffs.size() < 40)
        falloffs.push_back({file_base_name(in->path), json_string(e, "dtype"), json_string(e, "layout"),
                            fmt::format("{}x{}x{}", json_number(e, "m"), json_number(e, "n"), json_number(e, "k")),
                            fixed(100 * json_number(e, "efficiency"), 1), json_string(e, "falloff_reason")});
    const std::string stem = figure_stem("gemm", in->path);
    if (d.contains("model") && d["model"].is_object()) {
      const json& m = d["model"];
      // Heat map per dtype: GEMM names x phases, % of peak.
      std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> axes;
      std::map<std::string, std::map<std::pair<std::string, std::string>, double>> value;
      for (const json& g : m.value("gemms", json::array())) {
        const std::string dt = json_string(g, "dtype"), name = json_string(g, "name"), phase = json_string(g, "phase");
        auto& [names, phases] = axes[dt];
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
        if (std::find(phases.begin(), phases.end(), phase) == phases.end()) phases.push_back(phase);
        const int idx = int(json_number(g, "entry", -1));
        if (idx >= 0 && idx < int(entries.size()))
          value[dt][{name, phase}] = 100 * json_number(entries[size_t(idx)], "efficiency");
      }
      for (const auto& [dt, ax] : axes) {
        std::vector<double> v;
        for (const std::string& n : ax.first)
          for (const std::string& p : ax.second) {
            auto it = value[dt].find({n, p});
            v.push_back(it == value[dt].end() ? NAN : it->second);
          }
        HeatmapOptions opt;
        opt.title = fmt::format("{} GEMMs of {} ({} tokens), % of the {} peak", dt, json_string(m, "config"),
                                json_number(m, "tokens"), dt);
        opt.x_label = "phase";
        opt.y_label = "GEMM";
        opt.value_label = "% of peak";
        opt.v_min = 0;
        opt.v_max = 100;
        opt.cell_decimals = 0;
        opt.height = std::max(300, 60 + 26 * int(ax.first.size()));
        opt.width = 900;
        sec.figures.push_back(
            {fmt::format("{}_model_{}.svg", stem, dt), opt.title, SvgHeatmap(opt, ax.first, ax.second, v).render()});
      }
      const json summary = m.value("summary", json::object());
      for (const auto& [dt, s] : summary.items())
        models.push_back({file_base_name(in->path), json_string(m, "config"), dt, fixed(json_number(m, "tokens"), 0),
                          fixed(json_number(m, "expert_tokens"), 0),
                          fixed(1e3 * json_number(s, "gemm_seconds_per_step"), 1), fixed(json_number(s, "gflops"), 1),
                          fixed(100 * json_number(s, "efficiency"), 1)});
      continue;
    }
    // Sweep: one heat map (M x N) per dtype, layout and K.
    std::map<std::tuple<std::string, std::string, int64_t>, std::map<std::pair<int64_t, int64_t>, double>> grids;
    for (const json& e : entries)
      grids[{json_string(e, "dtype"), json_string(e, "layout"), int64_t(json_number(e, "k"))}]
           [{int64_t(json_number(e, "m")), int64_t(json_number(e, "n"))}] = 100 * json_number(e, "efficiency");
    int made = 0;
    for (const auto& [key, cells] : grids) {
      if (made++ >= 24) break;
      std::set<int64_t> ms, ns;
      for (const auto& [mn, v] : cells) {
        ms.insert(mn.first);
        ns.insert(mn.second);
      }
      std::vector<std::string> rl, cl;
      for (int64_t mv : ms) rl.push_back(std::to_string(mv));
      for (int64_t nv : ns) cl.push_back(std::to_string(nv));
      std::vector<double> v;
      for (int64_t mv : ms)
        for (int64_t nv : ns) {
          auto it = cells.find({mv, nv});
          v.push_back(it == cells.end() ? NAN : it->second);
        }
      const auto& [dt, layout, k] = key;
      HeatmapOptions opt;
      opt.title = fmt::format("{} GEMM ({}), K = {}: % of peak", dt, layout, k);
      opt.x_label = "N";
      opt.y_label = "M";
      opt.value_label = "% of peak";
      opt.v_min = 0;
      opt.v_max = 100;
      opt.cell_decimals = 0;
      sec.figures.push_back(
          {fmt::format("{}_{}_{}_k{}.svg", stem, dt, layout, k), opt.title, SvgHeatmap(opt, rl, cl, v).render()});
    }
  }
  sec.html =
      "<p>Efficiency is GFLOP/s of the fastest call over the measured peak (the best of a large square GEMM "
      "and every measured shape). A shape falls off when it is clearly slower per FLOP than a shape it "
      "contains, or slower in total than its padded version (tile and wave quantization).</p>\n" +
      html_table({"file", "dtype", "peak GFLOP/s", "DRAM GB/s", "ridge FLOP/byte"}, peaks);
  if (!models.empty())
    sec.html += html_table(
        {"file", "model", "dtype", "tokens", "rows per expert", "GEMM ms per micro-batch", "GFLOP/s", "% of peak"},
        models);
  if (!falloffs.empty())
    sec.html += "<p>Shapes that fall off:</p>\n" +
                html_table({"file", "dtype", "layout", "MxNxK", "% of peak", "why"}, falloffs);
  return sec;
}

ReportSection membw_report_section(const std::vector<const ReportInput*>& inputs) {
  ReportSection sec;
  sec.id = "membw";
  sec.title = "Memory bandwidth (zaya bench membw)";
  std::vector<std::vector<std::string>> rows;
  for (const ReportInput* in : inputs) {
    std::map<int, std::vector<Series>> by_threads;
    std::map<std::string, Series> triad;
    std::map<std::pair<int, int>, Series> curves;  // (kernel in measured order, threads)
    std::vector<std::string> kernels;
    for (const json& p : in->doc.value("points", json::array())) {
      const std::string k = json_string(p, "kernel");
      const int t = int(json_number(p, "threads"));
      if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
      const int ki = int(std::find(kernels.begin(), kernels.end(), k) - kernels.begin());
      Series& s = curves[{ki, t}];
      s.label = k;
      s.x.push_back(json_number(p, "working_set"));
      s.y.push_back(json_number(p, "best_gbps"));
    }
    for (const auto& [key, s] : curves) {
      const std::string& kernel = kernels[size_t(key.first)];
      by_threads[key.second].push_back(s);
      if (kernel == "triad")
        triad[fmt::format("triad, {} threads", key.second)] = {
            fmt::format("{} thread{}", key.second, key.second == 1 ? "" : "s"), s.x, s.y};
      const double best = *std::max_element(s.y.begin(), s.y.end());
      rows.push_back({file_base_name(in->path), kernel, std::to_string(key.second), fixed(s.y.front(), 1),
                      format_bytes(s.x.front()), fixed(best, 1), fixed(s.y.back(), 1), format_bytes(s.x.back())});
    }
    const std::string stem = figure_stem("membw", in->path);
    for (const auto& [t, series] : by_threads)
      sec.figures.push_back(line_figure(
          fmt::format("{}_{}t.svg", stem, t), fmt::format("memory bandwidth, {} thread{}", t, t == 1 ? "" : "s"),
          "working set (bytes)", "GB/s (best)", AxisScale::kLog10, AxisScale::kLog10, series));
    if (triad.size() > 1) {
      std::vector<Series> v;
      for (const auto& [k, s] : triad) v.push_back(s);
      sec.figures.push_back(line_figure(fmt::format("{}_triad_threads.svg", stem), "STREAM triad over thread counts",
                                        "working set (bytes)", "GB/s (best)", AxisScale::kLog10, AxisScale::kLog10, v));
    }
  }
  sec.html =
      "<p>Best of the repetitions, STREAM byte counting (copy/scale 16 bytes per element, add/triad 24, "
      "memcpy twice its size). The working set is all arrays a kernel touches; the steps of the curves are "
      "the cache levels.</p>\n" +
      html_table({"file", "kernel", "threads", "smallest GB/s", "at", "best GB/s", "largest GB/s", "at"}, rows);
  return sec;
}

ReportSection io_report_section(const std::vector<const ReportInput*>& inputs) {
  ReportSection sec;
  sec.id = "io";
  sec.title = "Storage (zaya bench io)";
  std::vector<std::vector<std::string>> rows, model_rows;
  std::vector<Series> curves;
  double step = 0;
  for (const ReportInput* in : inputs) {
    const json& d = in->doc;
    const json &w = d.value("checkpoint_write", json()), r = d.value("checkpoint_read", json());
    const json &p = d.value("random_pages", json()), s = d.value("sample_reads", json());
    rows.push_back({file_base_name(in->path), w.is_object() ? fixed(json_number(w, "gbps"), 3) : "-",
                    r.is_object() ? fixed(json_number(r, "gbps"), 3) : "-",
                    p.is_object() ? fixed(json_number(p, "iops"), 0) : "-",
                    p.is_object() ? fixed(json_number(p["latency_us"], "p99"), 1) : "-",
                    s.is_object() ? fixed(json_number(s, "sigma"), 3) : "-",
                    s.is_object() ? fixed(json_number(s, "read_amplification"), 2) : "-"});
    const json& m = d.value("storage_model", json::object());
    step = json_number(m, "step_seconds");
    model_rows.push_back({file_base_name(in->path), fixed(json_number(m, "batch"), 0),
                          fixed(json_number(m, "seq_len"), 0), fixed(json_number(m, "iops"), 0),
                          fixed(json_number(m, "sigma"), 3), fixed(json_number(m, "required_iops"), 0),
                          fixed(json_number(m, "break_even_seconds"), 4), fixed(step, 3),
                          json_number(m, "break_even_seconds") < step ? "storage-safe" : "storage-bound"});
    // t_break grows linearly with sigma: t_break(sigma) = sigma * t_break(1).
    const double per_sigma =
        json_number(m, "sigma") > 0 ? json_number(m, "break_even_seconds") / json_number(m, "sigma") : 0;
    Series c{fmt::format("{} (I_max {:.0f} IOPS)", file_base_name(in->path), json_number(m, "iops")), {}, {}};
    for (double sg = 1; sg <= 8.0001; sg += 0.25) {
      c.x.push_back(sg);
      c.y.push_back(sg * per_sigma);
    }
    curves.push_back(std::move(c));
  }
  sec.html =
      "<p>Checkpoint write includes the fsync; reads and page reads start from a cold page cache. sigma is "
      "the scatter factor of docs/systems-notes.md section 3, measured as page faults per training window over "
      "the ideal s*b/P; read amplification is bytes fetched per useful byte with the default readahead.</p>\n" +
      html_table(
          {"file", "ckpt write GB/s", "ckpt read GB/s", "page IOPS", "page p99 (us)", "sigma", "read amplification"},
          rows) +
      html_table({"file", "G", "s", "I_max", "sigma", "IOPS needed", "t_break (s)", "step t (s)", "verdict"},
                 model_rows);
  LinePlotOptions opt;
  opt.title = "break-even step time vs scatter factor";
  opt.x_label = "scatter factor sigma";
  opt.y_label = "t_break (s)";
  SvgLinePlot plot(opt);
  for (const Series& c : curves) plot.add_series(c.label, c.x, c.y);
  if (step > 0) plot.add_reference_line(step, fmt::format("step time {:g} s", step));
  sec.figures.push_back({"io_breakeven.svg", opt.title, plot.render()});
  return sec;
}

}  // namespace zaya
