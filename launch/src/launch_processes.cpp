// gossamer launch: one algorithm's peers as `gossamer peer` processes (docs/cli.md). Each child
// gets a fresh job token and id, its log in OUT/<algorithm>/peer<r>.log; the launcher follows
// their metrics files for the progress line, stops them at the job timeout or on Ctrl-C, and
// gathers their summaries and rank 0's average.json into a row of the table.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/launch/child_process.hpp"
#include "gossamer/launch/launch.hpp"
#include "gossamer/launch/local_ports.hpp"
#include "gossamer/peer/job.hpp"
#include "lab_hosts.hpp"
#include "live.hpp"
#include "metrics_follow.hpp"

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
    std::ofstream f(path);
    f << doc.dump(2) << "\n";
    if (!f) throw Error(fmt::format("cannot write {}", path.string()));
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
    std::ofstream f(path);
    f << doc.dump(2) << "\n";
    if (!f) throw Error(fmt::format("cannot write {}", path.string()));
    return path.string();
}

/// PYTHONPATH for a script peer: the gossamer package next to this binary (the build tree's
/// python/, or the install's lib/python3/dist-packages), then the caller's PYTHONPATH.
std::string python_path(const fs::path& exe) {
    const auto root = exe.parent_path().parent_path();
    std::vector<std::string> dirs;
    for (const auto& dir : {root / "python", root / "lib/python3/dist-packages"})
        if (fs::exists(dir / "gossamer" / "__init__.py")) dirs.push_back(dir.string());
    if (const char* old = std::getenv("PYTHONPATH"); old && *old) dirs.emplace_back(old);
    return fmt::format("{}", fmt::join(dirs, ":"));
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

}  // namespace

LaunchRow launch_processes(const LaunchJob& job, const std::string& algo, Progress& progress) {
    const int n = job.topology.n();
    const auto dir = job.out / algo;
    const std::string topology = job.lab ? lab_topology(job, dir) : peer_topology(job, dir);
    std::optional<std::string> cluster = job.cluster_path;
    if (job.lab && cluster) cluster = lab_cluster(job, dir);
    const std::string config = peer_config(job, dir);
    const std::string exe = fs::read_symlink("/proc/self/exe").string();
    const std::string token = hex_token();
    std::mt19937_64 rng(std::random_device{}());
    const auto resume = job.resume.find(algo);  // a resumed job keeps its id (docs/checkpoint.md)
    const auto job_id = resume != job.resume.end()
                            ? resume->second.job_id
                            : std::uniform_int_distribution<std::uint64_t>(1, 1ULL << 62)(rng);
    // Blocking communication when the peers outnumber the cores needs nothing here: each peer
    // counts the topology's peers on its host (UcxOptions::local_peers) and its automatic mode
    // then sleeps on UCX's event fd instead of spinning.
    const std::vector<std::pair<std::string, std::string>> env = {
        {"GOSSAMER_JOB_TOKEN", token},
        {"OPENBLAS_NUM_THREADS", std::to_string(job.threads_per_peer)}};

    // `ddp` runs bench/ddp_ref.py as a script peer; torch.distributed meets at rank 0's
    // address on a port free now (in the lab: rank 0's own namespace, where nothing listens).
    const bool ddp = algo == "ddp";
    const std::optional<std::string> script =
        ddp ? std::optional<std::string>(job.ddp_script) : job.script;
    const DdpRendezvous master = ddp ? ddp_rendezvous(job, 0) : DdpRendezvous{};

    Children kids;
    std::vector<Follower> follow(static_cast<std::size_t>(n));
    progress(fmt::format("{}: starting {} peer processes", algo, n), true);
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < n; ++r) {
        std::vector<std::string> argv = {exe,
                                         "peer",
                                         "--topology",
                                         topology,
                                         "--config",
                                         config,
                                         "--rank",
                                         std::to_string(r),
                                         "--algorithm",
                                         algo,
                                         "--epochs",
                                         std::to_string(job.epochs),
                                         "--out",
                                         dir.string(),
                                         "--job-id",
                                         std::to_string(job_id),
                                         "--eval-interval",
                                         fmt::format("{}", job.eval_interval),
                                         "--eval-samples",
                                         std::to_string(job.eval_samples)};
        if (cluster) argv.insert(argv.end(), {"--cluster", *cluster});
        if (job.checkpoint_every)
            argv.insert(argv.end(), {"--checkpoint-every", std::to_string(*job.checkpoint_every)});
        if (resume != job.resume.end())
            argv.insert(argv.end(), {"--resume", dir.string(), "--resume-step",
                                     std::to_string(resume->second.step)});
        if (job.trace)
            argv.insert(argv.end(), {"--trace", peer_trace_path(job, algo, r).string(),
                                     "--trace-limit", fmt::format("{}", job.trace_limit / 1e6)});
        auto peer_env = env;
        if (script) {  // the same facts through the environment (gossamer.launched())
            argv = {job.python, *script};
            if (!ddp) argv.insert(argv.end(), job.script_args.begin(), job.script_args.end());
            peer_env.insert(peer_env.end(),
                            {{"GOSSAMER_RANK", std::to_string(r)},
                             {"GOSSAMER_TOPOLOGY", topology},
                             {"GOSSAMER_CONFIG", config},
                             {"GOSSAMER_ALGORITHM", algo},
                             {"GOSSAMER_EPOCHS", std::to_string(job.epochs)},
                             {"GOSSAMER_OUT", dir.string()},
                             {"GOSSAMER_JOB_ID", std::to_string(job_id)},
                             {"GOSSAMER_EVAL_INTERVAL", fmt::format("{}", job.eval_interval)},
                             {"GOSSAMER_EVAL_SAMPLES", std::to_string(job.eval_samples)},
                             {"PYTHONPATH", python_path(exe)}});
            if (job.cluster) {  // a script pads its own steps (docs/cli.md)
                const auto& spec = job.cluster->peers[static_cast<std::size_t>(r)];
                peer_env.insert(
                    peer_env.end(),
                    {{"GOSSAMER_CLUSTER", *cluster},
                     {"GOSSAMER_STEP_TIME", fmt::format("{}", spec.base_time * spec.factor)}});
            }
            if (ddp) {
                peer_env.insert(peer_env.end(), {{"RANK", std::to_string(r)},
                                                 {"WORLD_SIZE", std::to_string(n)},
                                                 {"MASTER_ADDR", master.master_addr},
                                                 {"MASTER_PORT", std::to_string(master.port)}});
                if (job.lab)  // gloo on this rank's veth, the shaped link
                    peer_env.emplace_back("GLOO_SOCKET_IFNAME", ddp_rendezvous(job, r).ifname);
            }
        }
        if (job.lab) {
            const auto prefix = lab_exec_prefix(job, r);
            argv.insert(argv.begin(), prefix.begin(), prefix.end());
            const auto lab_env = lab_environment(job, r);
            peer_env.insert(peer_env.end(), lab_env.begin(), lab_env.end());
        }
        kids.start(argv, peer_env, dir / fmt::format("peer{}.log", r));
        follow[r].path = dir / fmt::format("peer{}.jsonl", r);
    }

    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    LaunchRow row;
    row.algorithm = algo;
    bool timed_out = false;
    std::vector<bool> stopped(static_cast<std::size_t>(n));  // by this launcher
    LiveTable live;
    for (;;) {
        kids.poll();
        for (auto& f : follow) f.read();
        const auto running = kids.running();
        if (running.empty()) break;
        const double wall = elapsed();
        if (const int sig = InterruptGuard::received()) {
            progress.done();
            std::cerr << fmt::format("{}: interrupted ({}): stopping peers {}\n", algo,
                                     signal_name(sig), join(running));
            kids.kill_all(5.0);
            throw Interrupted{sig};
        }
        // A peer that cannot run: the others would wait for it in vain.
        std::optional<int> hopeless;
        for (int r = 0; r < n && !hopeless; ++r)
            if (const auto& s = kids.status(r);
                s && (s->code == kBadUsage || s->code == kCannotExec))
                hopeless = r;
        if (wall > job.timeout || hopeless) {
            progress.done();
            if (hopeless)
                std::cerr << fmt::format("{}: peer {} could not start ({}); stopping the others\n",
                                         algo, *hopeless, describe(*kids.status(*hopeless)));
            else
                std::cerr << fmt::format(
                    "{}: job timeout after {:.0f} s (--timeout): peers {} still running; "
                    "stopping them\n",
                    algo, job.timeout, join(running));
            timed_out = !hopeless;
            for (int r : running) stopped[r] = true;
            kids.kill_all(5.0);
            row.ok = false;
            break;
        }
        std::int64_t done = 0;
        for (int r = 0; r < n; ++r) done += follow[r].steps;
        const std::string line =
            fmt::format("{}: {}/{} peers running, {}/~{} steps, {}, {:.1f} s", algo, running.size(),
                        n, done, job.total_steps, live_fragment(follow), wall);
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
        auto& f = follow[r];
        f.read();
        const ExitStatus st = kids.status(r).value_or(ExitStatus{});
        const auto log = dir / fmt::format("peer{}.log", r);
        json::Json rec = {
            {"rank", r}, {"exit", describe(st)}, {"steps", f.steps}, {"log", log.string()}};
        if (f.summary) {
            const auto& s = *f.summary;
            const double end = s.value("end_time", 0.0);
            const double share = end > 0 ? s.value("idle", 0.0) / end : 0.0;
            bytes += s.value("bytes_sent", 0.0);
            idle += share;
            ++reported;
            rec["end_time"] = end;
            row.train = std::max(row.train, end);
            rec["idle_share"] = share;
            rec["bytes_sent"] = s.value("bytes_sent", 0.0);
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
        } else if (st.signal == 0 && st.code == peer::kNoResult && !stopped[r]) {
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
            std::cerr << fmt::format("{}: peer {} was cut off from the job ({}): {}; lost peer\n",
                                     algo, r, describe(st),
                                     last.empty() ? std::string("its log is empty") : last.back());
        } else {
            if (stopped[r]) {
                rec["stopped_by_launcher"] = true;
            } else if (st.signal != 0) {
                ++row.failed;  // a crash: the algorithm may survive it
                rec["lost"] = "crash";
            } else {
                row.ok = false;  // the peer gave up (all-reduce on a dead peer), or bad input
            }
            report_failure(algo, r, stopped[r] ? "stopped by the launcher" : "failed", st, log);
        }
        row.peers.push_back(std::move(rec));
    }
    if (job.target) row.time_to_target = time_to_target(follow, *job.target);
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
    } else if (row.ok) {
        std::cerr << fmt::format("{}: the peers finished but wrote no {}\n", algo,
                                 (dir / "average.json").string());
        row.ok = false;
    }
    return row;
}

}  // namespace gossamer::launch
