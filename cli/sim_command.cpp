// gossamer sim: many peers with heterogeneous speeds in virtual time (docs/modules/simulator.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "algorithms.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/metrics.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/quantile.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/sim/setup_checks.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/topology_file.hpp"

namespace gossamer::cli {
namespace {

struct Stat {
    double mean = 0, spread = 0;  // spread: half the range over seeds
    int count = 0;
};

Stat stat_of(const std::vector<double>& v) {
    Stat s;
    s.count = static_cast<int>(v.size());
    if (v.empty()) return s;
    double lo = v[0], hi = v[0], sum = 0;
    for (double x : v) {
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
    }
    s.mean = sum / static_cast<double>(v.size());
    s.spread = (hi - lo) / 2;
    return s;
}

std::string show(const Stat& s, const char* fmt_mean, double scale = 1) {
    if (s.count == 0) return "-";
    std::string out = fmt::format(fmt::runtime(fmt_mean), s.mean * scale);
    if (s.count > 1) out += " ±" + fmt::format(fmt::runtime(fmt_mean), s.spread * scale);
    return out;
}

void write_run_files(const std::filesystem::path& dir, const sim::SimResult& r) {
    std::filesystem::create_directories(dir);
    MetricsWriter m((dir / "metrics.jsonl").string());
    for (const auto& e : r.evals)
        m.write({{"time", e.time},
                 {"accuracy", e.accuracy},
                 {"loss", e.loss},
                 {"min_accuracy", e.min_accuracy},
                 {"max_accuracy", e.max_accuracy},
                 {"mean_accuracy", e.mean_accuracy},
                 {"consensus", e.consensus},
                 {"samples", e.samples},
                 {"bytes", e.bytes},
                 {"backward_macs", e.backward_macs},
                 {"live", e.live}});
    MetricsWriter p((dir / "peers.jsonl").string());
    for (const auto& s : r.peers) {
        if (!s.recorded) continue;  // --peer-metrics
        json::Json rec = {{"rank", s.rank},
                          {"steps", s.steps},
                          {"busy", s.busy},
                          {"idle", s.idle},
                          {"idle_share", s.idle_share},
                          {"bytes_sent", s.bytes_sent},
                          {"bytes_received", s.bytes_received},
                          {"failed", s.failed},
                          {"left", s.left},
                          {"joins", s.joins},
                          {"mass", s.mass}};
        if (!s.edges.is_null()) rec["edges"] = s.edges;
        if (!s.partitions.is_null()) {
            rec["backward_macs"] = s.backward_macs;
            rec["partitions"] = s.partitions;
        }
        p.write(rec);
    }
    if (r.topology_versions.empty()) return;
    // Churn or failures: each version of the topology the job went through
    // (docs/operations/elastic.md).
    MetricsWriter t((dir / "topology.jsonl").string());
    for (const auto& v : r.topology_versions) {
        json::Json rec = {{"version", v.version},
                          {"time", v.time},
                          {"live", v.live},
                          {"connected", v.connected},
                          {"analysis", v.line}};
        rec["spectral_gap"] = v.spectral_gap ? json::Json(*v.spectral_gap) : json::Json(nullptr);
        t.write(rec);
    }
}

// A run's folder appears whole or not at all: it is written as DIR.partial and renamed (a full
// disk leaves no folder that looks complete; the error names the file and the cause).
void write_run(const std::filesystem::path& dir, const sim::SimResult& r) {
    const std::filesystem::path partial = dir.string() + ".partial";
    std::filesystem::remove_all(partial);
    try {
        write_run_files(partial, r);
    } catch (...) {
        std::error_code ec;
        std::filesystem::remove_all(partial, ec);
        throw;
    }
    std::filesystem::rename(partial, dir);
}

// --peer-metrics: which ranks get a peers.jsonl record (SimSetup::peer_records_every).
int peer_records_every(const std::optional<std::string>& value, int n) {
    const int sampled = (n + 1023) / 1024;  // about 1024 records
    if (!value) return n <= 4096 ? 1 : sampled;
    if (*value == "all") return 1;
    if (*value == "none") return 0;
    const std::string prefix = "sample ";
    if (value->rfind(prefix, 0) == 0) {
        const std::string k = value->substr(prefix.size());
        if (!k.empty() && k.size() <= 9 && k.find_first_not_of("0123456789") == std::string::npos) {
            const long long count = std::stoll(k);
            if (count >= 1)
                return static_cast<int>(std::max<long long>(1, (n + count - 1) / count));
        }
    }
    throw UsageError(fmt::format(
        "--peer-metrics: use all, none or \"sample K\" (K peers, K >= 1), not \"{}\"", *value));
}

// p50, p90 and p99 (nearest rank) of `v`, over every peer of every seed.
json::Json quantiles(std::vector<double> v) {
    if (v.empty()) return nullptr;
    return {{"p50", proto::quantile_in_place(v, 0.5)},
            {"p90", proto::quantile_in_place(v, 0.9)},
            {"p99", proto::quantile_in_place(v, 0.99)}};
}

}  // namespace

int run_sim(const std::vector<std::string>& args) {
    ArgParser p(
        "gossamer sim", "--topology T --cluster C --config TRAIN [options]",
        "Simulates n peers (n from the topology) in virtual time: every peer runs the "
        "same protocol objects as a real peer; compute and links follow the cluster "
        "file. Each algorithm runs on the same data order and cluster; the table shows "
        "the virtual time to the target accuracy, the final accuracy of the exact average "
        "of the peers' models (and min/max over peers), the consensus distance, samples/s, "
        "bytes sent per peer, backward multiply-adds per peer (GMAC) and the share of "
        "time peers sat idle. Writes "
        "OUT/<algorithm>/seed<k>/{metrics,peers}.jsonl; scripts/plot.py OUT draws them." +
            algorithms_help(),
        {{"topology", "FILE", "the topology file"},
         {"cluster", "FILE", "the cluster file (docs/formats/cluster-format.md)"},
         {"config", "FILE", "the training config (math mode; optional in cost mode)"},
         {"algorithms", "LIST",
          fmt::format("comma-separated (default {})",
                      proto::default_algorithms(proto::default_for_sim))},
         {"seeds", "K", "seeds per algorithm (default 1)"},
         {"out", "DIR", "output folder (default out/sim)"},
         {"mode", "M", "math (default) or cost (no values: timing and traffic only)"},
         {"network", "MODEL",
          "fair (max-min fair sharing between the messages in flight) or fifo (one "
          "message at a time per link, the model before 2026-12-02); default: the "
          "cluster file's network.model, else fair"},
         {"epochs", "N", "passes of each peer over its shard (default: training.epochs)"},
         {"steps", "N", "cost mode: local steps per peer (default 100)"},
         {"model-size", "N",
          "cost mode: parameters per model (default: the config's model, else 1000000)"},
         {"eval-interval", "S",
          "virtual seconds between evaluations (default: a quarter of a nominal epoch)"},
         {"target", "ACC", "target accuracy (default: training.target_accuracy)"},
         {"peer-eval-samples", "N",
          "test samples of each peer's own evaluation (default 2000; gossamer launch's "
          "--eval-samples)"},
         {"average-eval-samples", "N",
          "test samples of the exact average's evaluation at each tick (default: the "
          "whole test set; the final evaluation always uses the whole set)"},
         {"peer-metrics", "M",
          "peers.jsonl records: all, sample K (about K peers, evenly spread) or none "
          "(default: all up to 4096 peers, else sample 1024)"},
         {"trace", "FILE",
          "write the timeline (Chrome trace / Perfetto JSON, docs/formats/trace.md) to FILE; "
          "several algorithms or seeds: FILE-<algorithm>-seed<k>.json each"},
         {"trace-limit", "MB",
          "bound on each trace's events (default 64); past it whole steps are sampled "
          "and the file says so"},
         {"json", "", "print the summary as JSON"},
         {"save", "FILE", "also write the JSON summary to FILE"}},
        0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    for (const char* req : {"topology", "cluster"})
        if (!a.value(req))
            throw UsageError(fmt::format("gossamer sim: --{} FILE is required", req));
    const std::string mode_name = a.value("mode").value_or("math");
    if (mode_name != "math" && mode_name != "cost") throw UsageError("--mode: use math or cost");
    const auto mode = mode_name == "math" ? sim::Mode::math : sim::Mode::cost;
    if (mode == sim::Mode::math && !a.value("config"))
        throw UsageError("gossamer sim: --config FILE is required in math mode");

    // Everything is loaded and checked before anything runs or is written.
    auto topo = topology::load_topology(*a.value("topology"));
    auto cluster = load_cluster(*a.value("cluster"), topo.n());
    if (auto m = a.value("network")) {
        const auto model = network_model_from(*m);
        if (!model)
            throw UsageError(fmt::format("--network: unknown model \"{}\"; use fair or fifo", *m));
        cluster.network_model = *model;
    }
    const auto algorithms = parse_algorithms(
        a.value("algorithms").value_or(proto::default_algorithms(proto::default_for_sim)));
    const int seeds = static_cast<int>(a.integer("seeds", 1, 1, 1000));
    const std::filesystem::path out(a.value("out").value_or("out/sim"));
    std::optional<optim::TrainingConfig> cfg;
    optim::TrainingData data;
    if (a.value("config")) cfg = optim::load_training_config(*a.value("config"));
    Progress progress(30.0);
    set_blas_threads(1);
    sim::SimSetup base;
    base.topology = topo.schedule;
    base.cluster = &cluster;
    base.failure_detection = cluster.failure_detection;
    base.mode = mode;
    double steps = 0;  // local steps per peer, for the bound on a run's work
    if (mode == sim::Mode::math) {
        base.peer_eval_samples =
            static_cast<int>(a.integer("peer-eval-samples", 2000, 1, 100'000'000));
        base.average_eval_samples =
            static_cast<int>(a.integer("average-eval-samples", 0, 1, 100'000'000));
        progress(fmt::format("loading {}", cfg->data.name));
        data = optim::load_training_data(*cfg);
        base.train = &data.train;
        base.test = &data.test;
        base.epochs = static_cast<int>(a.integer("epochs", cfg->epochs, 1, 100000));
        Time fastest = never;
        for (const auto& peer : cluster.peers)
            fastest = std::min(fastest, peer.base_time * peer.factor);
        const double batches = static_cast<double>(data.train.size()) / topo.n() / cfg->batch_size;
        steps = base.epochs * batches;
        base.eval_interval = a.number("eval-interval", fastest * batches / 4);
        if (!(base.eval_interval > 0)) throw UsageError("--eval-interval: must be > 0");
    } else {
        base.steps = a.integer("steps", 100, 1, 1'000'000'000);
        steps = static_cast<double>(base.steps);
        std::uint64_t size = 1'000'000;
        if (cfg) {
            progress("loading data for the model size");
            data = optim::load_training_data(*cfg);
            size = optim::build_model(*cfg, data.train)->parameter_count();
        }
        base.model_size = static_cast<std::uint64_t>(
            a.integer("model-size", static_cast<std::int64_t>(size), 1, INT64_MAX));
    }
    base.peer_records_every = peer_records_every(a.value("peer-metrics"), topo.n());
    const auto trace_file = a.value("trace");
    const auto trace_limit = trace_limit_bytes(a);
    if (trace_file) trace::check_writable(*trace_file, "--trace");
    // A plain double (NaN = none): GCC 12 warns wrongly about std::optional<double> here.
    double goal = cfg && cfg->target_accuracy ? *cfg->target_accuracy : std::nan("");
    if (a.value("target")) goal = a.number("target", 0);
    const bool has_goal = !std::isnan(goal);

    // Every algorithm's options are checked before the first one runs: a bad option for the
    // last algorithm must not leave the others' results half-written.
    check_algorithms(algorithms, cfg ? &*cfg : nullptr,
                     mode == sim::Mode::math ? &data.train : nullptr, topo.schedule,
                     base.model_size);
    // Sizes that cannot work (memory, resync timeouts against the transfer of one full model)
    // are refused before anything runs; then the output folder is made ready
    // (docs/operations/cli.md).
    const std::uint64_t parameters = mode == sim::Mode::math
                                         ? optim::build_model(*cfg, data.train)->parameter_count()
                                         : base.model_size;
    for (const auto& algo : algorithms) {
        sim::SimSetup s = base;
        s.algorithm = algo;
        s.config = cfg ? &*cfg : nullptr;
        if (cfg) s.options = cfg->algorithm_options(algo);
        sim::check_sizes(s, parameters,
                         {cfg ? cfg->doc.file : "",
                          mode == sim::Mode::cost && a.value("model-size") ? "--model-size" : ""});
        // The work a run needs (events, evaluations) is bounded before it starts.
        const bool epochs_flag = mode == sim::Mode::cost || a.value("epochs");
        sim::check_work(s, steps,
                        {epochs_flag ? "" : cfg->doc.file,
                         mode == sim::Mode::cost ? "--steps"
                         : epochs_flag           ? "--epochs"
                                                 : "training.epochs",
                         a.value("eval-interval").has_value()});
    }
    if (auto notice = prepare_output_dir(out, "gossamer sim", {"", "--out"}))
        std::cerr << "note: " << *notice << "\n";
    AllocationScope scope(
        fmt::format("the state of {} simulated peers of {} parameters", topo.n(), parameters));

    json::Json summary = {{"topology", *a.value("topology")},
                          {"cluster", *a.value("cluster")},
                          {"n", topo.n()},
                          {"mode", mode_name},
                          {"network", to_string(cluster.network_model)},
                          {"seeds", seeds},
                          {"algorithms", json::Json::array()}};
    std::string table = fmt::format(
        "{:<10} {:>16} {:>15} {:>13} {:>11} {:>11} {:>12} {:>14} {:>8}\n", "algorithm",
        has_goal ? fmt::format("time to {:.1f}%", 100 * goal) : "time [s]", "final acc [%]",
        "min..max [%]", "consensus", "samples/s", "MB sent/peer", "bwd GMAC/peer", "idle");
    for (const auto& algo : algorithms) {
        std::vector<double> t_target, acc, lo, hi, cons, sps, mb, idle, end, gmac, mb_goal,
            gmac_goal, samples_goal, t_peer_mean;
        std::vector<double> q_idle, q_bytes, q_stale;  // every peer of every seed
        std::vector<double> masses, mass_starts,
            crash_losses;  // push-sum (docs/operations/elastic.md)
        int reached = 0;
        for (int k = 0; k < seeds; ++k) {
            sim::SimSetup s = base;
            s.algorithm = algo;
            s.seed = (cfg ? cfg->seed : 1) + static_cast<std::uint64_t>(k);
            optim::TrainingConfig c;
            if (cfg) {
                c = *cfg;
                c.seed = s.seed;
                c.sharding.seed = s.seed;
                s.config = &c;
                s.options = cfg->algorithm_options(algo);
            }
            s.progress = [&](std::string_view line) { progress(line); };
            progress(fmt::format("{} seed {}/{}", algo, k + 1, seeds), true);
            std::optional<trace::Recorder> rec;
            if (trace_file) {
                rec.emplace("virtual", trace_limit);
                rec->set_info("algorithm", algo);
                rec->set_info("seed", s.seed);
                s.trace = &*rec;
            }
            const auto r = sim::simulate(s);
            write_run(out / algo / fmt::format("seed{}", k), r);
            if (rec) {
                const bool one = algorithms.size() == 1 && seeds == 1;
                const std::string path =
                    one ? *trace_file
                        : trace::tagged_path(*trace_file, fmt::format("{}-seed{}", algo, k));
                rec->write(path);
                progress(fmt::format("trace: {} ({} events, every {} step{})", path, rec->events(),
                                     rec->every(), rec->every() > 1 ? "s" : ""),
                         true);
            }
            progress(
                fmt::format("{} seed {}: {} events in {:.1f} s ({:.0f} events/s)", algo, k + 1,
                            r.events, r.wall_seconds, r.events / std::max(r.wall_seconds, 1e-9)),
                true);
            if (r.stopped_by_failure)
                std::cerr << fmt::format("{}: rank {} failed; all-reduce stops\n", algo,
                                         *r.stopped_by_failure);
            // The first seed's topology versions (all of them are in topology.jsonl).
            constexpr std::size_t kShownVersions = 12;
            if (k == 0)
                for (std::size_t v = 0; v < r.topology_versions.size(); ++v) {
                    if (v == kShownVersions) {
                        progress(fmt::format("{}: {} more topology versions in topology.jsonl",
                                             algo, r.topology_versions.size() - v),
                                 true);
                        break;
                    }
                    const auto& tv = r.topology_versions[v];
                    progress(fmt::format("{} at {:.2f} s: {}", algo, tv.time, tv.line), true);
                }
            masses.push_back(r.mass);
            mass_starts.push_back(r.mass_start);
            crash_losses.push_back(r.crash_loss);
            end.push_back(r.end_time);
            sps.push_back(r.samples / std::max(r.end_time, 1e-12));
            double bytes = 0, idle_sum = 0;
            for (const auto& ps : r.peers) {
                bytes += static_cast<double>(ps.bytes_sent);
                idle_sum += ps.idle_share;
                q_idle.push_back(ps.idle_share);
                q_bytes.push_back(static_cast<double>(ps.bytes_sent));
                q_stale.push_back(static_cast<double>(ps.staleness_max));
            }
            mb.push_back(bytes / r.peers.size() / 1e6);
            double macs = 0;
            for (const auto& ps : r.peers) macs += static_cast<double>(ps.backward_macs);
            gmac.push_back(macs / r.peers.size() / 1e9);
            idle.push_back(idle_sum / r.peers.size());
            if (!r.evals.empty()) {
                const auto& last = r.evals.back();
                acc.push_back(last.accuracy);
                lo.push_back(last.min_accuracy);
                hi.push_back(last.max_accuracy);
                cons.push_back(last.consensus);
                for (const auto& e : r.evals)
                    if (has_goal && e.mean_accuracy >= goal) {
                        t_peer_mean.push_back(e.time);
                        break;
                    }
                for (const auto& e : r.evals)
                    if (has_goal && e.accuracy >= goal) {
                        t_target.push_back(e.time);
                        const double n_peers = static_cast<double>(r.peers.size());
                        mb_goal.push_back(static_cast<double>(e.bytes) / n_peers / 1e6);
                        gmac_goal.push_back(static_cast<double>(e.backward_macs) / n_peers / 1e9);
                        samples_goal.push_back(static_cast<double>(e.samples));
                        ++reached;
                        break;
                    }
            }
        }
        const Stat st = stat_of(t_target), sa = stat_of(acc), sl = stat_of(lo), sh = stat_of(hi),
                   sc = stat_of(cons), ss = stat_of(sps), sm = stat_of(mb), si = stat_of(idle),
                   se = stat_of(end), sg = stat_of(gmac), smg = stat_of(mb_goal),
                   sgg = stat_of(gmac_goal), sst = stat_of(samples_goal);
        std::string time_col =
            has_goal ? (reached == seeds ? show(st, "{:.1f}")
                                         : fmt::format("{}/{} reached", reached, seeds))
                     : show(se, "{:.1f}");
        table += fmt::format(
            "{:<10} {:>16} {:>15} {:>13} {:>11} {:>11} {:>12} {:>14} {:>8}\n", algo, time_col,
            show(sa, "{:.2f}", 100),
            acc.empty() ? "-" : fmt::format("{:.1f}..{:.1f}", 100 * sl.mean, 100 * sh.mean),
            show(sc, "{:.3g}"), show(ss, "{:.0f}"), show(sm, "{:.1f}"),
            gmac.empty() || sg.mean == 0 ? "-" : show(sg, "{:.1f}"),
            fmt::format("{:.1f}%", 100 * si.mean));
        const bool all_reached = reached == seeds && has_goal;
        summary["algorithms"].push_back(
            {{"algorithm", algo},
             {"time_to_target",
              reached == seeds && has_goal ? json::Json(st.mean) : json::Json(nullptr)},
             {"time_to_target_spread", st.spread},
             // The same target for the mean of the peers' own accuracies (like gossamer launch).
             {"time_to_target_peer_mean",
              has_goal && t_peer_mean.size() == static_cast<std::size_t>(seeds)
                  ? json::Json(stat_of(t_peer_mean).mean)
                  : json::Json(nullptr)},
             {"samples_to_target",
              reached == seeds && has_goal ? json::Json(sst.mean) : json::Json(nullptr)},
             {"reached", reached},
             {"final_accuracy", sa.mean},
             {"final_accuracy_spread", sa.spread},
             {"min_accuracy", sl.mean},
             {"max_accuracy", sh.mean},
             {"consensus", sc.mean},
             {"samples_per_s", ss.mean},
             {"mb_sent_per_peer", sm.mean},
             {"idle_share", si.mean},
             {"backward_gmac_per_peer", sg.mean},
             {"mb_to_target_per_peer", all_reached ? json::Json(smg.mean) : json::Json(nullptr)},
             {"mb_to_target_spread", smg.spread},
             {"backward_gmac_to_target_per_peer",
              all_reached ? json::Json(sgg.mean) : json::Json(nullptr)},
             {"backward_gmac_to_target_spread", sgg.spread},
             {"end_time", se.mean},
             {"mass", stat_of(masses).mean},
             {"mass_start", stat_of(mass_starts).mean},
             {"crash_loss", stat_of(crash_losses).mean},
             {"peer_quantiles",
              {{"idle_share", quantiles(q_idle)},
               {"bytes_sent", quantiles(q_bytes)},
               {"staleness_max", quantiles(q_stale)}}}});
    }
    progress.done();
    if (auto path = a.value("save")) {
        write_file_atomically(*path, summary.dump(2) + "\n", "summary (--save)");
    }
    if (a.flag("json"))
        std::cout << summary.dump(2) << "\n";
    else
        std::cout
            << table
            << fmt::format(
                   "metrics: {}/<algorithm>/seed<k>/; plots: /usr/bin/python3 scripts/plot.py {}\n",
                   out.string(), out.string());
    return 0;
}

}  // namespace gossamer::cli
