// gossamer report (docs/operations/report.md): reads what gossamer sim or launch wrote into a run
// folder and writes one self-contained HTML page of inline SVG.
#include "gossamer/launch/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "gossamer/core/error.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/metrics.hpp"
#include "gossamer/core/text_metrics.hpp"
#include "gossamer/topology/topology_file.hpp"
#include "report_edges.hpp"
#include "report_outer.hpp"
#include "svg.hpp"

namespace gossamer::launch {
namespace {

namespace fs = std::filesystem;
using json::Json;

struct Algo {
    std::string name;
    // acc_*: accuracy in %, or on text data (lines with "bpc") bits per character.
    svg::Series acc_time, loss_time, acc_bytes;
    bool text = false;
    std::vector<double> idle;                     // idle share per peer
    std::vector<std::vector<double>> edge_bytes;  // [sender][receiver], from a timeline
    EdgeMaps edges;                               // staleness and weights, from edge metrics
    std::vector<std::vector<svg::Span>> lanes;    // steps and waits per peer, from a timeline
    std::vector<std::string> traces;
    OuterNote outer;  // under "outer": its options and rounds (report_outer.hpp)
};

// Lines of a JSON-lines file, the malformed ones (a peer killed mid-line) left out.
std::vector<Json> lines_of(const fs::path& p) {
    std::vector<Json> out;
    std::ifstream in(p);
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        try {
            out.push_back(Json::parse(line));
        } catch (const Json::exception&) {
        }
    }
    return out;
}

std::optional<Json> json_file(const fs::path& p) {
    std::ifstream in(p);
    if (!in) return std::nullopt;
    try {
        return Json::parse(in);
    } catch (const Json::exception&) {
        return std::nullopt;
    }
}

// Bytes per directed edge from a timeline's sends; grows `m` to the peers it names.
void add_edge_bytes(const Json& doc, std::vector<std::vector<double>>& m) {
    if (!doc.contains("traceEvents")) return;
    for (const auto& e : doc["traceEvents"]) {
        if (e.value("cat", "") != "send" || !e.contains("args")) continue;
        const auto from = e["pid"].get<std::size_t>();
        const auto to = e["args"].value("to", std::size_t{0});
        const std::size_t n = std::max({m.size(), from + 1, to + 1});
        if (n > 4096) continue;  // a heatmap of more peers says nothing
        m.resize(n);
        for (auto& row : m) row.resize(n);
        m[from][to] += e["args"].value("bytes", 0.0);
    }
}

// Steps and waits per peer from a timeline (the first 64 peers, at most 20,000 bars: a page,
// not a trace viewer; the file itself has everything).
void add_lanes(const Json& doc, std::vector<std::vector<svg::Span>>& lanes) {
    if (!doc.contains("traceEvents")) return;
    std::size_t bars = 0;
    for (const auto& lane : lanes) bars += lane.size();
    for (const auto& e : doc["traceEvents"]) {
        if (e.value("ph", "") != "X" || !e.contains("pid") || !e["pid"].is_number()) continue;
        const std::string cat = e.value("cat", "");
        if (cat != "step" && cat != "wait") continue;
        const auto peer = e["pid"].get<std::size_t>();
        if (peer >= 64 || ++bars > 20'000) continue;
        if (lanes.size() <= peer) lanes.resize(peer + 1);
        const double start = e.value("ts", 0.0) / 1e6, dur = e.value("dur", 0.0) / 1e6;
        lanes[peer].push_back({start, start + dur, cat == "step" ? 0 : 1,
                               fmt::format("{} ({:.3f} s)", e.value("name", cat), dur)});
    }
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / static_cast<double>(v.size());
}

std::string cell(const Json& j, const char* key, double scale, const char* f) {
    if (!j.contains(key) || !j[key].is_number()) return "-";
    return fmt::format(fmt::runtime(f), j[key].get<double>() * scale);
}

// gossamer sim: OUT/<algorithm>/seed0/{metrics,peers}.jsonl, timelines anywhere under OUT
// whose otherData names the algorithm (the first seed's).
std::vector<Algo> read_sim(const fs::path& run, std::string& table) {
    std::vector<Algo> algos;
    std::string rows;
    bool text = false;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(run))
        if (fs::exists(e.path() / "seed0" / "metrics.jsonl")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) {
        Algo a;
        a.name = d.filename().string();
        const auto peers = lines_of(d / "seed0" / "peers.jsonl");
        for (const auto& p : peers) {
            a.idle.push_back(p.value("idle_share", 0.0));
            note_outer(p, a.outer);
            if (p.contains("edges"))
                add_edge_metrics(p.value("rank", -1), p["edges"], peers.size(), a.edges);
        }
        const double n = std::max<double>(1, static_cast<double>(peers.size()));
        const auto metrics = lines_of(d / "seed0" / "metrics.jsonl");
        for (const auto& m : metrics) {
            a.text = a.text || m.contains("bpc");
            const double t = m.value("time", 0.0),
                         acc = a.text ? m.value("bpc", 0.0) : 100 * m.value("accuracy", 0.0);
            a.acc_time.points.emplace_back(t, acc);
            a.loss_time.points.emplace_back(t, m.value("loss", 0.0));
            a.acc_bytes.points.emplace_back(m.value("bytes", 0.0) / n / 1e6, acc);
        }
        text = text || a.text;
        const Json last = metrics.empty() ? Json::object() : metrics.back();
        rows += fmt::format(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}%</td>"
            "<td>{}</td></tr>\n",
            svg::escape(a.name),
            a.text ? cell(last, "bpc", 1, "{:.4f}") : cell(last, "accuracy", 100, "{:.2f}"),
            cell(last, "loss", 1, "{:.4f}"), cell(last, "time", 1, "{:.2f}"),
            cell(last, "bytes", 1 / n / 1e6, "{:.2f}"), 100 * mean(a.idle), peers.size());
        a.acc_time.name = a.loss_time.name = a.acc_bytes.name = a.name;
        algos.push_back(std::move(a));
    }
    table =
        fmt::format(
            "<tr><th>algorithm</th><th>{}</th><th>loss{}</th><th>end time [s]</th>"
            "<th>MB sent/peer</th><th>idle</th><th>peers</th></tr>\n",
            text ? "final bits per character" : "final accuracy [%]", text ? " [nats/char]" : "") +
        rows;
    // Timelines: any trace under OUT (two levels) whose otherData names the algorithm.
    for (auto it = fs::recursive_directory_iterator(run); it != fs::recursive_directory_iterator();
         ++it) {
        if (it.depth() > 2) it.disable_recursion_pending();
        const auto& p = it->path();
        if (!it->is_regular_file() || p.extension() != ".json" ||
            p.filename().string().find("trace") == std::string::npos)
            continue;
        const auto doc = json_file(p);
        if (!doc || !doc->contains("otherData")) continue;
        const auto algo = (*doc)["otherData"].value("algorithm", "");
        for (auto& a : algos)
            if (a.name == algo) {
                a.traces.push_back(p.string());
                if (a.edge_bytes.empty()) add_edge_bytes(*doc, a.edge_bytes);
                if (a.lanes.empty()) add_lanes(*doc, a.lanes);
            }
    }
    return algos;
}

// gossamer launch: OUT/result.json and OUT/<algorithm>/peer<r>.jsonl (evaluation lines, the
// summary), timelines OUT/<algorithm>/peer<r>.trace.json and the merged file.
std::vector<Algo> read_launch(const fs::path& run, const Json& result, std::string& table) {
    std::vector<Algo> algos;
    // Text data: result.json's rows carry "final_bpc"; a loss target is "target_loss".
    bool text = false;
    for (const auto& row : result["algorithms"]) text = text || row.contains("final_bpc");
    const std::string target_head =
        result.contains("target_loss") && result["target_loss"].is_number()
            ? fmt::format("time to loss &le; {:g} [s]", result["target_loss"].get<double>())
            : "time to target [s]";
    table = fmt::format(
        "<tr><th>algorithm</th><th>{}</th><th>train [s]</th><th>{}</th><th>loss{}</th><th>MB "
        "sent/peer</th><th>idle</th><th>lost</th></tr>\n",
        target_head, text ? "final bits per character" : "final accuracy [%]",
        text ? " [nats/char]" : "");
    for (const auto& row : result["algorithms"]) {
        Algo a;
        a.name = row.value("algorithm", "?");
        a.text = text;
        table += fmt::format(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td></tr>\n",
            svg::escape(a.name), cell(row, "time_to_target", 1, "{:.2f}"),
            cell(row, "train_seconds", 1, "{:.2f}"),
            text ? cell(row, "final_bpc", 1, "{:.4f}") : cell(row, "final_accuracy", 100, "{:.2f}"),
            cell(row, "final_loss", 1, "{:.4f}"), cell(row, "mb_sent_per_peer", 1, "{:.2f}"),
            cell(row, "idle_share", 100, "{:.1f}%"),
            row.contains("failed_peers") ? row["failed_peers"].dump() : "-");
        std::map<long, std::vector<std::pair<double, double>>> ticks;  // tick -> (acc, loss)
        std::map<long, std::vector<double>> tick_bytes;                // tick -> bytes per peer
        std::map<long, double> tick_time;
        const int n = result.value("n", 0);
        for (int r = 0; r < n; ++r) {
            const auto dir = run / a.name;
            const auto lines = lines_of(dir / fmt::format("peer{}.jsonl", r));
            // The peer's cumulative sends from its own timeline, for accuracy against bytes.
            std::vector<std::pair<double, double>> sent;  // (time s, bytes so far)
            const auto trace = dir / fmt::format("peer{}.trace.json", r);
            if (const auto doc = json_file(trace)) {
                a.traces.push_back(trace.string());
                add_edge_bytes(*doc, a.edge_bytes);
                add_lanes(*doc, a.lanes);
                for (const auto& e : (*doc)["traceEvents"])
                    if (e.value("cat", "") == "send")
                        sent.emplace_back(e["ts"].get<double>() / 1e6,
                                          e["args"].value("bytes", 0.0));
                std::sort(sent.begin(), sent.end());
                for (std::size_t i = 1; i < sent.size(); ++i) sent[i].second += sent[i - 1].second;
            }
            for (const auto& l : lines) {
                if (l.contains("summary")) {
                    note_outer(l, a.outer);
                    if (l.contains("edges"))
                        add_edge_metrics(r, l["edges"], static_cast<std::size_t>(n), a.edges);
                    const double busy = l.value("busy", 0.0), idle = l.value("idle", 0.0);
                    a.idle.resize(static_cast<std::size_t>(r + 1));
                    a.idle[static_cast<std::size_t>(r)] =
                        busy + idle > 0 ? idle / (busy + idle) : 0;
                }
                if (!l.contains("eval") || !l.contains("accuracy")) continue;
                const long k = l["eval"].get<long>();
                ticks[k].emplace_back(l["accuracy"].get<double>(), l.value("loss", 0.0));
                tick_time[k] = l.value("time", 0.0);
                if (!sent.empty()) {
                    const double at = l.value("at", 0.0);
                    const auto it =
                        std::upper_bound(sent.begin(), sent.end(), std::pair{at, 1e300});
                    tick_bytes[k].push_back(it == sent.begin() ? 0 : std::prev(it)->second);
                }
            }
        }
        for (const auto& [k, v] : ticks) {
            std::vector<double> acc, loss;
            for (const auto& [x, y] : v) acc.push_back(x), loss.push_back(y);
            const double shown = text ? text_metrics::bits_per_char(mean(loss)) : 100 * mean(acc);
            a.acc_time.points.emplace_back(tick_time[k], shown);
            a.loss_time.points.emplace_back(tick_time[k], mean(loss));
            if (tick_bytes.contains(k))
                a.acc_bytes.points.emplace_back(mean(tick_bytes[k]) / 1e6, shown);
        }
        a.acc_time.name = a.loss_time.name = a.acc_bytes.name = a.name;
        algos.push_back(std::move(a));
    }
    // The merged timelines (--trace FILE inside RUN): listed first, by the folder of the peer
    // files they merged.
    for (const auto& e : fs::directory_iterator(run)) {
        const auto& p = e.path();
        if (!e.is_regular_file() || p.extension() != ".json" ||
            p.filename().string().find("trace") == std::string::npos)
            continue;
        const auto doc = json_file(p);
        if (!doc || !doc->contains("otherData") || !(*doc)["otherData"].contains("files")) continue;
        const auto& files = (*doc)["otherData"]["files"];
        if (files.empty()) continue;
        const auto algo = fs::path(files[0].value("file", "")).parent_path().filename().string();
        for (auto& a : algos)
            if (a.name == algo) a.traces.insert(a.traces.begin(), p.string());
    }
    return algos;
}

std::string link_to(const fs::path& target, const fs::path& page) {
    std::error_code ec;
    const auto rel =
        fs::relative(target, page.parent_path().empty() ? "." : page.parent_path(), ec);
    return ec || rel.empty() ? target.string() : rel.string();
}

}  // namespace

ReportSummary write_report(const ReportOptions& o) {
    ReportSummary sum;
    std::error_code ec;
    if (!fs::is_directory(o.run, ec))
        throw ConfigError(o.run.string(), "", "not a folder",
                          "give the --out folder of gossamer sim or gossamer launch");
    std::string table;
    std::vector<Algo> algos;
    std::optional<std::string> topology_path = o.topology;
    const auto result = json_file(o.run / "result.json");
    if (result && result->contains("algorithms") && result->contains("transport")) {
        sum.kind = "launch";
        algos = read_launch(o.run, *result, table);
        if (!topology_path && result->contains("topology"))
            topology_path = (*result)["topology"].get<std::string>();
    } else {
        sum.kind = "sim";
        algos = read_sim(o.run, table);
    }
    if (algos.empty())
        throw ConfigError(o.run.string(), "",
                          "not a run folder of gossamer sim or launch (no result.json of launch, "
                          "no <algorithm>/seed0/metrics.jsonl of sim)",
                          "give the --out folder of a finished run");
    const fs::path page = o.out.empty() ? o.run / "report.html" : o.out;

    std::vector<svg::Series> acc_t, loss_t, acc_b;
    std::vector<std::string> names;
    std::vector<std::vector<double>> idle;
    for (const auto& a : algos) {
        acc_t.push_back(a.acc_time);
        loss_t.push_back(a.loss_time);
        if (!a.acc_bytes.points.empty()) acc_b.push_back(a.acc_bytes);
        names.push_back(a.name);
        idle.push_back(a.idle);
        sum.algorithms.push_back(a.name);
    }
    const bool launch = sum.kind == "launch";
    // A language model (text data): bits per character where a classifier shows accuracy.
    const bool text = std::any_of(algos.begin(), algos.end(), [](const Algo& a) { return a.text; });
    std::string body;
    body += outer_section(algos);
    if (text) {
        body += "<h2>Bits per character and loss</h2>\n<div class=\"plots\">";
        body += svg::line_chart(launch ? "Mean bits per character of the peers' own models"
                                       : "Bits per character of the average model",
                                "time [s]", "bits per character", acc_t);
        body += svg::line_chart("Loss", "time [s]", "loss [nats/char]", loss_t);
    } else {
        body += "<h2>Accuracy and loss</h2>\n<div class=\"plots\">";
        body += svg::line_chart(
            launch ? "Mean accuracy of the peers' own models" : "Accuracy of the average model",
            "time [s]", "accuracy [%]", acc_t);
        body += svg::line_chart("Loss", "time [s]", "loss", loss_t);
    }
    sum.charts += 2;
    if (!acc_b.empty()) {
        body += text ? svg::line_chart("Bits per character against bytes", "MB sent per peer",
                                       "bits per character", acc_b)
                     : svg::line_chart("Accuracy against bytes", "MB sent per peer", "accuracy [%]",
                                       acc_b);
        ++sum.charts;
    } else {
        sum.notes.push_back(launch ? "accuracy against bytes: gossamer launch records bytes over "
                                     "time only in its timelines; run it with --trace"
                                   : "accuracy against bytes: no evaluation points (cost mode)");
    }
    body += "</div>\n<h2>Idle per peer</h2>\n";
    body += svg::bar_chart("Share of time each peer sat idle", "idle share", names, idle);
    ++sum.charts;
    body += "\n<h2>Topology</h2>\n";
    bool drawn = false;
    if (topology_path) {
        try {
            const auto topo = topology::load_topology(*topology_path);
            std::vector<std::pair<int, int>> edges;
            for (const auto& e : topo.schedule->base_graph().edges())
                edges.emplace_back(e.from, e.to);
            body += svg::graph(topo.schedule->describe(), topo.n(), edges);
            ++sum.charts;
            drawn = true;
        } catch (const Error& e) {
            sum.notes.push_back(fmt::format("topology: {}", e.what()));
        }
    }
    if (!drawn) {
        // The graph the peers used, from who sent to whom in a timeline.
        for (const auto& a : algos)
            if (!a.edge_bytes.empty()) {
                std::vector<std::pair<int, int>> edges;
                for (std::size_t i = 0; i < a.edge_bytes.size(); ++i)
                    for (std::size_t j = 0; j < a.edge_bytes[i].size(); ++j)
                        if (a.edge_bytes[i][j] > 0) edges.emplace_back(i, j);
                body += svg::graph(fmt::format("who sent to whom ({})", a.name),
                                   static_cast<int>(a.edge_bytes.size()), edges);
                ++sum.charts;
                break;
            }
        if (!topology_path) sum.notes.push_back("topology: give --topology FILE to draw it");
    }
    body += "\n<h2>Per edge</h2>\n<div class=\"plots\">";
    bool any_heat = false;
    for (const auto& a : algos)
        if (!a.edge_bytes.empty()) {
            body +=
                svg::heatmap(fmt::format("{}: bytes sent per edge", a.name), "bytes", a.edge_bytes);
            ++sum.charts;
            any_heat = true;
        }
    if (!any_heat) {
        body +=
            "<p>No timeline in this folder: run with <code>--trace</code> for bytes per edge.</p>";
        sum.notes.push_back("bytes per edge: no timeline in the folder (run with --trace)");
    }
    // Staleness and weights: what each protocol's per-edge metrics say (docs/operations/report.md).
    for (const auto& a : algos) {
        if (!a.edges.staleness.empty()) {
            body += svg::heatmap(fmt::format("{}: mean staleness per edge (rounds)", a.name),
                                 "rounds", a.edges.staleness);
            ++sum.charts;
        }
        if (!a.edges.weight.empty()) {
            body += svg::heatmap(fmt::format("{}: mixing weight per edge", a.name), "weight",
                                 a.edges.weight);
            ++sum.charts;
        }
        if (a.edges.empty())
            sum.notes.push_back(fmt::format(
                "staleness and weights per edge for {}: it writes no per-edge metrics", a.name));
    }
    body += "</div>\n<h2>Timelines</h2>\n";
    for (const auto& a : algos)
        if (!a.lanes.empty()) {
            body += svg::timeline(fmt::format("{}: steps and waits per peer", a.name), a.lanes);
            ++sum.charts;
        }
    body += "<ul>";
    for (const auto& a : algos)
        for (const auto& t : a.traces) {
            body += fmt::format("<li><a class=\"trace\" href=\"{0}\">{0}</a> ({1})</li>",
                                svg::escape(link_to(t, page)), svg::escape(a.name));
            sum.traces.push_back(t);
        }
    body +=
        "</ul><p>Open a timeline in Perfetto (ui.perfetto.dev, Open trace file) or "
        "chrome://tracing; the files stay on this machine.</p>\n";

    std::string html = fmt::format(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Gossamer "
        "report: {0}</title><style>body{{font-family:sans-serif;margin:2em;max-width:1200px}}"
        "table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;"
        "text-align:right}}td:first-child{{text-align:left}}.plots svg{{margin:0 1em 1em 0}}"
        "</style></head>\n<body><h1>Gossamer report: {0}</h1>\n<p>{1} run in {0}, written by "
        "gossamer report.</p>\n<h2>Comparison</h2>\n<table id=\"summary\">\n{2}</table>\n{3}",
        svg::escape(o.run.string()), launch ? "A gossamer launch" : "A gossamer sim", table, body);
    if (!sum.notes.empty()) {
        html += "<h2>Not shown</h2><ul>";
        for (const auto& n : sum.notes) html += "<li>" + svg::escape(n) + "</li>";
        html += "</ul>";
    }
    html += "</body></html>\n";
    if (!page.parent_path().empty()) fs::create_directories(page.parent_path(), ec);
    std::ofstream f(page);
    f << html;
    if (!f)
        throw ConfigError(page.string(), "--out", "cannot write the page",
                          "choose a writable path");
    sum.page = page;
    return sum;
}

}  // namespace gossamer::launch
