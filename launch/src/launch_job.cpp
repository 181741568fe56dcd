// gossamer launch's job, assembled from its flags and checked before anything runs or is written
// (docs/operations/cli.md).
#include "gossamer/launch/launch_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "gossamer/core/blas.hpp"
#include "gossamer/core/checkpoint_file.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/lab/system.hpp"
#include "gossamer/launch/local_ports.hpp"
#include "gossamer/peer/checkpoints.hpp"

namespace gossamer::launch {
namespace {

namespace fs = std::filesystem;

// One line for a flag, as the command line's own usage errors read.
[[noreturn]] void refuse(const std::string& line) {
    throw ConfigError("", "", line);
}

/// `ddp` mirrors the built-in softmax and mlp with SGD (bench/ddp_ref.py): anything else is
/// refused before the first algorithm runs, rather than by each script peer.
void check_ddp_config(const std::string& path, const optim::TrainingConfig& cfg) {
    std::ifstream in(path);
    const auto doc = json::Json::parse(in, nullptr, false, true);
    const auto model = doc.is_object() && doc.contains("model") && doc["model"].is_object()
                           ? doc["model"].value("name", std::string())
                           : std::string();
    if (model != "softmax" && model != "mlp")
        refuse(fmt::format(
            "{}: model.name: ddp (bench/ddp_ref.py) has torch twins of softmax and mlp, not "
            "\"{}\"; leave ddp out of --algorithms or use one of those models",
            path, model));
    if (cfg.optimizer.kind != optim::OptimizerKind::sgd)
        refuse(fmt::format(
            "{}: optimizer.name: ddp mirrors sgd only (torch.optim.SGD is its rule); leave ddp "
            "out of --algorithms or use sgd",
            path));
    if (doc.is_object() && doc.contains("multirate"))
        refuse(
            fmt::format("{}: multirate: ddp trains every parameter at every step; leave ddp out "
                        "of --algorithms or remove multirate",
                        path));
}

// The ddp reference script, absolute (GOSSAMER_DDP_SCRIPT overrides the source tree's).
std::string ddp_script(const LaunchRequest& r) {
    const char* env = std::getenv("GOSSAMER_DDP_SCRIPT");
    const fs::path ddp = env && *env ? fs::path(env) : fs::path(r.ddp_script);
    if (!fs::is_regular_file(ddp))
        refuse(
            fmt::format("--algorithms: ddp needs its script {}, which is not a file; set "
                        "GOSSAMER_DDP_SCRIPT to bench/ddp_ref.py of the source tree",
                        ddp.string()));
    return fs::absolute(ddp).string();
}

// --hosts, --script and --checkpoint-every against each other and --inproc.
void check_hosts_and_script(LaunchJob& job, const LaunchRequest& r, bool with_ddp) {
    const int n = job.topology.n();
    if (r.hosts != "local" && r.hosts != "netns")
        refuse(fmt::format("--hosts: \"{}\" is not a kind of host; use local or netns", r.hosts));
    job.hosts = r.hosts;
    const bool netns = r.hosts == "netns";
    if (with_ddp && r.inproc)
        refuse(
            "--algorithms: ddp runs torch processes (bench/ddp_ref.py), not --inproc threads; "
            "leave out --inproc or ddp");
    if (with_ddp) job.ddp_script = ddp_script(r);
    if (netns && (r.inproc || r.script))
        refuse(fmt::format("--hosts netns: the lab runs gossamer peer processes, not {}",
                           r.inproc ? "--inproc threads" : "--script peers"));
    if (netns && n > lab::kMaxPeers)
        refuse(fmt::format("--hosts netns: {} peers do not fit in one lab (at most {})", n,
                           lab::kMaxPeers));
    if (netns)
        if (const auto missing = lab::missing_requirements(); !missing.empty())
            refuse("--hosts netns: " + missing);
    if (r.script) {
        if (!fs::is_regular_file(*r.script))
            refuse(
                fmt::format("--script: {} is not a file; give the path of a Python training script",
                            *r.script));
        if (r.inproc)
            refuse(
                "--script: a script peer is a process of its own, not an --inproc thread; leave "
                "out --inproc");
        job.script = fs::absolute(*r.script).string();
        std::istringstream words(r.script_args.value_or(""));
        for (std::string w; words >> w;) job.script_args.push_back(w);
    } else if (r.script_args) {
        refuse("--script-args: it needs --script FILE");
    }
    if (r.checkpoint_every) {
        if (r.inproc) refuse("--checkpoint-every: peer processes only; leave out --inproc");
        job.checkpoint_every = *r.checkpoint_every;
    }
}

}  // namespace

LaunchJob prepare_job(const LaunchRequest& r) {
    LaunchJob job;
    job.topology_path = r.topology_path;
    job.config_path = r.config_path;
    job.cluster_path = r.cluster_path;
    job.topology = topology::load_topology(job.topology_path);
    const int n = job.topology.n();
    if (job.cluster_path)
        job.cluster = std::make_shared<const Cluster>(load_cluster(*job.cluster_path, n));
    job.algorithms = r.algorithms;
    const bool with_ddp =
        std::find(r.algorithms.begin(), r.algorithms.end(), "ddp") != r.algorithms.end();
    job.out = r.out.value_or("out/launch");
    job.config =
        std::make_shared<const optim::TrainingConfig>(optim::load_training_config(job.config_path));
    const auto& cfg = *job.config;
    if (with_ddp) check_ddp_config(job.config_path, cfg);
    job.epochs = r.epochs.value_or(cfg.epochs);
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    job.threads_per_peer = r.threads_per_peer.value_or(std::max(1, cores / n));
    job.timeout = r.timeout;
    if (job.timeout <= 0)
        refuse(fmt::format("gossamer launch: --timeout {}: give seconds > 0",
                           r.timeout_text.value_or("")));
    job.eval_interval = r.eval_interval;
    job.eval_samples = r.eval_samples;
    job.trace = r.trace;
    job.trace_limit = r.trace_limit;
    job.trace_per_algorithm = r.algorithms.size() > 1;
    job.live = r.live;
    if (job.trace) trace::check_writable(*job.trace, "--trace");
    job.target = r.target ? r.target : cfg.target_accuracy;
    if (job.target && !(*job.target > 0 && *job.target <= 1))
        refuse(fmt::format("--target: {} is not an accuracy in (0, 1]", *job.target));
    job.inproc = r.inproc;
    check_hosts_and_script(job, r, with_ddp);
    return job;
}

void check_restart(LaunchJob& job, const LaunchRequest& r) {
    const int n = job.topology.n();
    check_churn(job, job.inproc, r.resume.has_value());
    if (r.resume) {
        if (r.out && fs::path(*r.out) != fs::path(*r.resume))
            refuse(
                "--resume: the job resumes into the folder it stopped in; leave out --out or give "
                "the same folder");
        if (job.inproc || job.script || !job.ddp_script.empty())
            refuse(fmt::format("--resume: resumes gossamer peer processes, not {}; leave it out",
                               job.inproc   ? "--inproc threads"
                               : job.script ? "--script peers"
                                            : "ddp"));
        job.out = *r.resume;
        // Every algorithm's step before anything starts: a folder that cannot resume is one
        // line and exit 2 (each peer checks its own file again before it joins).
        for (const auto& algo : job.algorithms) {
            const auto step = peer::resume_step(job.out / algo, n, -1, std::nullopt, "--resume");
            const auto first =
                load_checkpoint_file(peer::checkpoint_path(job.out / algo, 0, step).string());
            job.resume[algo] = {step, first.header.job_id};
        }
    }
    if (job.inproc || job.hosts == "netns") return;
    std::set<std::string> hosts;
    for (const auto& peer : job.topology.peers) hosts.insert(peer.host);
    for (const auto& host : hosts)
        if (!is_local_host(host))
            refuse(fmt::format(
                "{}: peers: host {} is not an address of this machine; gossamer launch "
                "starts local peers (start remote ones with gossamer peer on each host)",
                job.topology_path, host));
}

std::unique_ptr<optim::TrainingData> load_job_data(const LaunchJob& job, Progress& progress) {
    set_blas_threads(1);  // n peers share this machine's cores
    progress(fmt::format("loading {}", job.config->data.name));
    return std::make_unique<optim::TrainingData>(optim::load_training_data(*job.config));
}

void check_job_data(LaunchJob& job, const optim::TrainingData& data) {
    const auto& cfg = *job.config;
    const int n = job.topology.n();
    // The smallest shard (the workers check each again): a batch that cannot fit fails here,
    // before OUT is written.
    optim::check_batch_size(cfg, static_cast<std::int64_t>(data.train.size()) / n);
    // About the steps of all peers together (shards may differ by a batch): the progress line's.
    job.total_steps = static_cast<std::int64_t>(data.train.size()) / n /
                      std::max<std::int64_t>(cfg.batch_size, 1) * job.epochs * n;
}

}  // namespace gossamer::launch
