// gossamer launch: one algorithm's peers as `gossamer peer` processes (docs/operations/cli.md).
// Each child gets a fresh job token and id, its log in OUT/<algorithm>/peer<r>.log; the launcher
// follows their metrics files for the progress line, starts the cluster file's late and returning
// ranks (churn.hpp, docs/operations/elastic.md), stops them at the job timeout or on Ctrl-C, and
// gathers their summaries and rank 0's average.json into a row of the table.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "churn.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/launch/child_process.hpp"
#include "gossamer/launch/launch.hpp"
#include "gossamer/launch/local_ports.hpp"
#include "gossamer/peer/job.hpp"
#include "lab_hosts.hpp"
#include "live.hpp"
#include "metrics_follow.hpp"
#include "peer_command.hpp"

namespace gossamer::launch {
namespace {

namespace fs = std::filesystem;

constexpr int kBadUsage = 2;
constexpr int kCannotExec = 127;
constexpr int kLogLines = 10;

std::string hex_token() {
    std::random_device rd;
    std::string t;
    for (int i = 0; i < 4; ++i) t += fmt::format("{:08x}", rd());
    return t;
}

/// The topology file the peers get: the user's, or (when one of its ports is taken) a copy in
/// `dir` with free ports on the same hosts.
std::string peer_topology(const LaunchJob& job, const fs::path& dir) {
    const auto& peers = job.topology.peers;
    std::vector<int> busy;
    for (std::size_t r = 0; r < peers.size(); ++r)
        if (!port_free(peers[r].host, peers[r].port)) busy.push_back(static_cast<int>(r));
    if (busy.empty()) return job.topology_path;
    std::map<std::string, std::vector<int>> ranks_of_host;
    for (std::size_t r = 0; r < peers.size(); ++r)
        ranks_of_host[peers[r].host].push_back(static_cast<int>(r));
    json::Json list = json::Json::array();
    std::vector<json::Json> entries(peers.size());
    for (const auto& [host, ranks] : ranks_of_host) {
        const auto ports = free_ports(host, static_cast<int>(ranks.size()));
        for (std::size_t i = 0; i < ranks.size(); ++i)
            entries[ranks[i]] = {{"host", host}, {"port", ports[i]}};
    }
    for (auto& e : entries) list.push_back(std::move(e));
    std::ifstream in(job.topology_path);
    auto doc = json::Json::parse(in, nullptr, true, true);
    doc["peers"] = list;
    const auto path = dir / "topology.json";
    write_file_atomically(path.string(), doc.dump(2) + "\n", "topology of the peers");
    std::cerr << fmt::format("port {} of rank {} is taken: the peers use {} (free ports)\n",
                             peers[busy[0]].port, busy[0], path.string());
    return path.string();
}

/// The training config the peers get: the user's, or (when --threads-per-peer differs from its
/// training.threads, which `gossamer peer` applies over OPENBLAS_NUM_THREADS) a copy in `dir`
/// with training.threads set.
std::string peer_config(const LaunchJob& job, const fs::path& dir) {
    if (job.threads_per_peer == job.config->threads) return job.config_path;
    std::ifstream in(job.config_path);
    auto doc = json::Json::parse(in, nullptr, true, true);
    doc["training"]["threads"] = job.threads_per_peer;
    const auto path = dir / "config.json";
    write_file_atomically(path.string(), doc.dump(2) + "\n", "training config of the peers");
    return path.string();
}

std::string join(const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
    return s;
}

/// "dpsgd: peer 2 failed: killed by SIGKILL; last lines of OUT/dpsgd/peer2.log:" and the lines.
void report_failure(const std::string& algo, int rank, std::string_view what, const ExitStatus& st,
                    const fs::path& log) {
    std::cerr << fmt::format("{}: peer {} {}: {}; last lines of {}:\n", algo, rank, what,
                             describe(st), log.string());
    for (const auto& line : last_lines(log, kLogLines)) std::cerr << "    " << line << "\n";
}

/// Rank r's record in the row (its last process decides whether the job lost it), and its
/// lines on stderr.
json::Json gather_rank(const std::string& algo, int r, const RankRun& rr, const Children& kids,
                       Follower& f, const fs::path& dir, bool stopped, LaunchRow& row,
                       int& finished) {
    json::Json rec = {{"rank", r}, {"joins", rr.joins}};
    if (!rr.earlier.empty()) rec["earlier"] = rr.earlier;
    if (rr.child < 0) {  // the job ended (or was stopped) before its join_at
        rec["exit"] = "never started";
        rec["never_started"] = rr.never;
        std::cerr << fmt::format("{}: peer {} never started: {}\n", algo, r, rr.never);
        return rec;
    }
    f.read();
    const ExitStatus st = kids.status(rr.child).value_or(ExitStatus{});
    const auto log = dir / fmt::format("peer{}.log", r);
    rec.update(
        {{"exit", describe(st)}, {"steps", f.steps + rr.earlier_steps}, {"log", log.string()}});
    if (!rr.never.empty()) rec["never_rejoined"] = rr.never;
    if (f.summary) {
        const auto& s = *f.summary;
        const double end = s.value("end_time", 0.0);
        rec["end_time"] = end;
        // The job ends when its last process does, on the job's clock (a process started
        // later counts its end_time from its own start: job_shift is that start).
        row.train = std::max(row.train, end + s.value("job_shift", 0.0));
        rec["idle_share"] = end > 0 ? s.value("idle", 0.0) / end : 0.0;
        rec["bytes_sent"] = s.value("bytes_sent", 0.0) + rr.earlier_bytes;
        rec["failed_peers"] = s.value("failed_peers", json::Json::array());
    }
    if (st.ok()) {
        ++finished;
    } else if (st.signal == 0 && st.code == peer::kEmulatedFailure) {
        ++row.failed;
        rec["lost"] = "emulated failure";
        std::cerr << fmt::format(
            "{}: peer {} stopped at its failure time from the cluster "
            "file ({}); lost peer\n",
            algo, r, describe(st));
    } else if (st.signal == 0 && st.code == peer::kDiverged && !stopped) {
        ++row.failed;  // it left as a crash does; the others carry on without it
        ++row.diverged;
        rec["lost"] = "diverged";
        std::cerr << fmt::format(
            "{}: peer {} diverged ({}): its loss or model became NaN or infinite; lost peer; "
            "last lines of {}:\n",
            algo, r, describe(st), log.string());
        for (const auto& line : last_lines(log, 3)) std::cerr << "    " << line << "\n";
    } else if (st.signal == 0 && st.code == peer::kNoResult && !stopped) {
        ++row.failed;  // the job lost it (a majority carried on, or nobody writes a result)
        rec["lost"] = "cut off";
        // Its own last line ("[rank R] ..."), not a bootstrap warning its other thread
        // wrote after it (rank 0 closing the connection to a peer it expelled).
        auto last = last_lines(log, 8);
        const auto own = std::find_if(last.rbegin(), last.rend(), [r](const std::string& l) {
            return l.rfind(fmt::format("[rank {}] ", r), 0) == 0;
        });
        if (own != last.rend())
            last = {*own};
        else if (!last.empty())
            last = {last.back()};
        std::cerr << fmt::format("{}: peer {} was cut off from the job ({}): {}; lost peer\n", algo,
                                 r, describe(st),
                                 last.empty() ? std::string("its log is empty") : last.back());
    } else {
        if (stopped) {
            rec["stopped_by_launcher"] = true;
        } else if (st.signal != 0) {
            ++row.failed;  // a crash: the algorithm may survive it
            rec["lost"] = "crash";
        } else if (rr.joining && f.steps == 0) {
            ++row.failed;  // started with --join, never got in (the job was ending): lost
            rec["lost"] = "could not join";
        } else {
            row.ok = false;  // the peer gave up (all-reduce on a dead peer), or bad input
        }
        report_failure(algo, r, stopped ? "stopped by the launcher" : "failed", st, log);
    }
    return rec;
}

}  // namespace

LaunchRow launch_processes(const LaunchJob& job, const std::string& algo, Progress& progress) {
    const int n = job.topology.n();
    const auto dir = job.out / algo;
    const ChurnPlan plan = churn_plan(job.cluster.get(), n);
    PeerSetup s{job, algo};
    s.n = n;
    s.plan = &plan;
    s.topology = job.lab ? lab_topology(job, dir) : peer_topology(job, dir);
    s.cluster = job.cluster_path;
    if (job.lab && s.cluster) s.cluster = lab_cluster(job, dir);
    s.config = peer_config(job, dir);
    s.exe = fs::read_symlink("/proc/self/exe").string();
    std::mt19937_64 rng(std::random_device{}());
    s.resume = job.resume.find(algo);  // a resumed job keeps its id (docs/operations/checkpoint.md)
    s.job_id = s.resume != job.resume.end()
                   ? s.resume->second.job_id
                   : std::uniform_int_distribution<std::uint64_t>(1, 1ULL << 62)(rng);
    // Blocking communication when the peers outnumber the cores needs nothing here: each peer
    // counts the topology's peers on its host (UcxOptions::local_peers) and its automatic mode
    // then sleeps on UCX's event fd instead of spinning.
    s.env = {{"GOSSAMER_JOB_TOKEN", hex_token()},
             {"OPENBLAS_NUM_THREADS", std::to_string(job.threads_per_peer)}};
    // `ddp` and `diloco` run bench/ddp_ref.py and bench/diloco_ref.py as script peers;
    // torch.distributed meets at rank 0's address on a port free now (in the lab: rank 0's own
    // namespace, where nothing listens).
    const auto torch_script = job.torch_scripts.find(algo);
    s.torch_row = torch_script != job.torch_scripts.end();
    s.script = s.torch_row ? std::optional<std::string>(torch_script->second) : job.script;
    if (s.torch_row) s.master = ddp_rendezvous(job, 0);

    Children kids;
    std::vector<Follower> follow(static_cast<std::size_t>(n));
    std::vector<RankRun> ranks(static_cast<std::size_t>(n));
    std::vector<int> rank_of;  // child index -> rank
    const auto t0 = std::chrono::steady_clock::now();
    // The job's clock starts at its first step (docs/operations/elastic.md, "The job's clock"): the
    // peers present at the start count the cluster file's times from their own start, which is the
    // barrier's release; the launcher learns that moment from the first step lines, and gives
    // it to every rank it starts later (--job-start) and to its own join_at and rejoin_at.
    std::optional<double> origin;  // unix seconds
    const auto unix_now = [] {
        return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    };
    const auto start = [&](int r, bool entering) {
        auto& rr = ranks[static_cast<std::size_t>(r)];
        auto& f = follow[static_cast<std::size_t>(r)];
        if (rr.processes > 0) {  // its earlier process's files aside: peer<r>.<k>.*
            f.read();
            const auto trace =
                job.trace ? std::optional(peer_trace_path(job, algo, r)) : std::nullopt;
            const auto log = archive_process(dir, r, rr.processes - 1, trace);
            const double bytes = f.summary ? f.summary->value("bytes_sent", 0.0) : 0.0;
            rr.earlier.push_back({{"process", rr.processes - 1},
                                  {"exit", describe(kids.status(rr.child).value_or(ExitStatus{}))},
                                  {"steps", f.steps},
                                  {"bytes_sent", bytes},
                                  {"log", log.string()}});
            rr.earlier_steps += f.steps;
            rr.earlier_bytes += bytes;
            // Its evaluation points stay: every process evaluates at the job's ticks.
            auto evals = std::move(f.evals);
            f = Follower{};
            f.evals = std::move(evals);
        }
        auto [argv, env] = peer_command(s, r, entering);
        rr.child = kids.start(argv, env, dir / fmt::format("peer{}.log", r));
        rank_of.push_back(r);
        f.path = dir / fmt::format("peer{}.jsonl", r);
        ++rr.processes;
        if (entering) ++rr.joins;
        rr.joining = entering;
        rr.start_at.reset();
        rr.exit_seen = false;
    };
    const int at_start = plan.present_at_start();
    progress(at_start == n ? fmt::format("{}: starting {} peer processes", algo, n)
                           : fmt::format("{}: starting {} of {} peer processes (the others join "
                                         "later: cluster file)",
                                         algo, at_start, n),
             true);
    for (int r = 0; r < n; ++r)
        if (plan.join_at[static_cast<std::size_t>(r)] > 0)
            ranks[static_cast<std::size_t>(r)].start_at = plan.join_at[static_cast<std::size_t>(r)];
        else
            start(r, false);

    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    const auto ranks_of = [&](const std::vector<int>& children) {
        std::vector<int> out;
        for (int c : children) out.push_back(rank_of[static_cast<std::size_t>(c)]);
        return out;
    };
    const auto never_start = [&](const std::string& why) {
        for (auto& rr : ranks)
            if (rr.start_at) {
                rr.never = fmt::format("{} before its {} at {:g} s", why,
                                       rr.processes > 0 ? "rejoin_at" : "join_at", *rr.start_at);
                rr.start_at.reset();
            }
    };
    LaunchRow row;
    row.algorithm = algo;
    bool timed_out = false;
    std::vector<bool> stopped(static_cast<std::size_t>(n));  // by this launcher
    LiveTable live;
    for (;;) {
        kids.poll();
        for (auto& f : follow) f.read();
        const double wall = elapsed();
        // A peer at its failure time with a rejoin_at comes back then (with --join).
        for (int r = 0; r < n; ++r) {
            auto& rr = ranks[static_cast<std::size_t>(r)];
            if (rr.child < 0 || rr.exit_seen || !kids.status(rr.child)) continue;
            rr.exit_seen = true;
            const auto& st = *kids.status(rr.child);
            const double back = plan.rejoin_at[static_cast<std::size_t>(r)];
            if (st.signal == 0 && st.code == peer::kEmulatedFailure && !rr.restarted &&
                std::isfinite(back)) {
                rr.restarted = true;
                rr.start_at = back;
                progress(fmt::format("{}: peer {} stopped at its failure time (cluster file); it "
                                     "rejoins at {:g} s",
                                     algo, r, back),
                         true);
            }
        }
        // Starts that are due, once the job passed its start-up barrier (a --join before it is
        // refused): its first step is the sign.
        bool began = false;
        double latest = 0;  // the latest step end read, on its peer's clock
        for (std::size_t r = 0; r < follow.size(); ++r) {
            began = began || follow[r].steps > 0 || ranks[r].earlier_steps > 0;
            if (follow[r].steps > 0) latest = std::max(latest, follow[r].time);
        }
        if (began && !origin) {
            origin = unix_now() - latest;
            s.job_start = fmt::format("{:.6f}", *origin);
        }
        const double job_now = origin ? unix_now() - *origin : 0;
        const bool anyone = !kids.running().empty();
        for (int r = 0; r < n; ++r) {
            auto& rr = ranks[static_cast<std::size_t>(r)];
            if (rr.start_at && *rr.start_at <= job_now && began && anyone) start(r, true);
        }
        const auto running = ranks_of(kids.running());
        if (running.empty()) {
            never_start("the job ended");
            break;
        }
        if (const int sig = InterruptGuard::received()) {
            progress.done();
            std::cerr << fmt::format("{}: interrupted ({}): stopping peers {}\n", algo,
                                     signal_name(sig), join(running));
            kids.kill_all(5.0);
            throw Interrupted{sig};
        }
        // A peer that cannot run: the others would wait for it in vain. (A --join that fails
        // is a lost peer, below: the others carry on.)
        std::optional<int> hopeless;
        for (int c = 0; c < kids.size() && !hopeless; ++c) {
            const int r = rank_of[static_cast<std::size_t>(c)];
            if (const auto& st = kids.status(c);
                st && (st->code == kBadUsage || st->code == kCannotExec) &&
                ranks[static_cast<std::size_t>(r)].joins == 0)
                hopeless = c;
        }
        if (wall > job.timeout || hopeless) {
            progress.done();
            if (hopeless)
                std::cerr << fmt::format("{}: peer {} could not start ({}); stopping the others\n",
                                         algo, rank_of[static_cast<std::size_t>(*hopeless)],
                                         describe(*kids.status(*hopeless)));
            else
                std::cerr << fmt::format(
                    "{}: job timeout after {:.0f} s (--timeout): peers {} still running; "
                    "stopping them\n",
                    algo, job.timeout, join(running));
            timed_out = !hopeless;
            for (int r : running) stopped[static_cast<std::size_t>(r)] = true;
            never_start("the launcher stopped the job");
            kids.kill_all(5.0);
            row.ok = false;
            break;
        }
        std::int64_t done = 0;
        for (int r = 0; r < n; ++r)
            done += follow[static_cast<std::size_t>(r)].steps +
                    ranks[static_cast<std::size_t>(r)].earlier_steps;
        const auto pending = pending_text(ranks);
        const std::string line =
            fmt::format("{}: {}/{} peers running{}, {}/~{} steps, {}, {:.1f} s", algo,
                        running.size(), n, pending.empty() ? "" : " (" + pending + ")", done,
                        job.total_steps, live_fragment(follow), wall);
        if (job.live) {
            if (live.tty()) progress.done();  // the table takes the terminal's last lines
            auto lines = live_table(follow);
            lines.insert(lines.begin(), line);
            live.show(lines, wall);
        } else {
            progress(line);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    row.wall = elapsed();
    progress.done();
    if (job.live) {  // the table as the peers left it
        for (auto& f : follow) f.read();
        auto lines = live_table(follow);
        lines.insert(lines.begin(),
                     fmt::format("{}: done, {}, {:.1f} s", algo, live_fragment(follow), row.wall));
        live.show(lines, row.wall, true);
    }

    // Gather: exit statuses, summaries, rank 0's average.
    double bytes = 0, idle = 0;
    int reported = 0, finished = 0;
    for (int r = 0; r < n; ++r) {
        const auto i = static_cast<std::size_t>(r);
        auto rec = gather_rank(algo, r, ranks[i], kids, follow[i], dir, stopped[i], row, finished);
        if (rec.contains("bytes_sent")) {
            bytes += rec["bytes_sent"].get<double>();
            idle += rec["idle_share"].get<double>();
            ++reported;
        }
        row.peers.push_back(std::move(rec));
    }
    if (job.target) row.time_to_target = time_to_target(follow, *job.target, job.target_is_loss);
    row.text = job.text;
    if (timed_out) row.ok = false;
    if (finished == 0) row.ok = false;
    row.mb_per_peer = bytes / n / 1e6;
    row.idle_share = reported > 0 ? idle / reported : 0.0;
    if (std::ifstream in(dir / "average.json"); in) {
        const auto avg = json::Json::parse(in, nullptr, false);
        if (!avg.is_discarded() && avg.contains("accuracy") && avg["accuracy"].is_number())
            row.accuracy = avg["accuracy"].get<double>();
        if (!avg.is_discarded() && avg.contains("loss") && avg["loss"].is_number())
            row.loss = avg["loss"].get<double>();
        if (!avg.is_discarded() && avg.contains("survivors")) row.survivors = avg["survivors"];
        if (!avg.is_discarded() && avg.contains("total_mass") && avg["total_mass"].is_number())
            row.total_mass = avg["total_mass"].get<double>();
    } else if (row.ok) {
        std::cerr << fmt::format("{}: the peers finished but wrote no {}\n", algo,
                                 (dir / "average.json").string());
        row.ok = false;
    }
    return row;
}

}  // namespace gossamer::launch
