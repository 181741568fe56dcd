// gossamer launch's job, assembled from its flags and checked before anything runs or is written
// (docs/operations/cli.md).
#include "gossamer/launch/launch_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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

/// The torch rows of --algorithms (docs/results/benchmarks.md): the script each runs and the
/// variable that names another.
struct TorchRow {
    const char* algorithm;
    const char* script;  ///< in the source tree
    const char* env;
};
constexpr TorchRow kTorchRows[] = {
    {"ddp", "bench/ddp_ref.py", "GOSSAMER_DDP_SCRIPT"},
    {"diloco", "bench/diloco_ref.py", "GOSSAMER_DILOCO_SCRIPT"},
};

/// ddp's options, the config's algorithms.ddp (bench/ddp_ref.py's ddp_options says the same
/// lines): "hook" ("none" or "fp16", torch's fp16_compress_hook) and "post_local" ({"start": S,
/// "period": H}, torch's post-local SGD), not both.
void check_ddp_options(const std::string& path, const json::Json& doc) {
    if (!doc.is_object() || !doc.contains("algorithms") || !doc["algorithms"].is_object() ||
        !doc["algorithms"].contains("ddp"))
        return;
    const auto& options = doc["algorithms"]["ddp"];
    const std::string where = path + ": algorithms.ddp";
    if (!options.is_object())
        refuse(where + ": expected an object of options, e.g. {\"hook\": \"fp16\"}");
    for (const auto& item : options.items())
        if (item.key() != "hook" && item.key() != "post_local")
            refuse(fmt::format("{}: unknown key \"{}\"; ddp takes \"hook\" and \"post_local\"",
                               where, item.key()));
    const auto hook = options.value("hook", json::Json("none"));
    if (hook != "none" && hook != "fp16")
        refuse(
            fmt::format("{}.hook: {} is not a hook of ddp; use \"none\" or \"fp16\" (torch's "
                        "fp16_compress_hook)",
                        where, hook.dump()));
    if (!options.contains("post_local")) return;
    const auto& post = options["post_local"];
    const std::string fix = "give {\"start\": S, \"period\": H} with S >= 0 and H >= 1 (integers)";
    if (!post.is_object()) refuse(where + ".post_local: expected an object; " + fix);
    for (const auto& item : post.items())
        if (item.key() != "start" && item.key() != "period")
            refuse(fmt::format("{}.post_local: unknown key \"{}\"; {}", where, item.key(), fix));
    for (const auto& [key, low] : {std::pair<std::string, double>{"start", 0}, {"period", 1}}) {
        const bool given = post.contains(key);
        const auto& v = given ? post[key] : json::Json();
        const bool count = v.is_number() && !v.is_boolean() &&
                           v.get<double>() == std::floor(v.get<double>()) && v.get<double>() >= low;
        if (!count)
            refuse(fmt::format("{}.post_local.{}: {}; {}", where, key,
                               given ? v.dump() : std::string("missing"), fix));
    }
    if (hook != "none")
        refuse(
            fmt::format("{}: \"hook\": {} with \"post_local\" is not mirrored; give one of "
                        "them (two rows)",
                        where, hook.dump()));
}

/// A torch row mirrors the built-in softmax, mlp and gpt (its twin, gossamer.models_torch.Gpt)
/// with any local optimizer (sgd, adam, adamw: torch.optim's rules; bench/torch_job.py); `ddp` is
/// per-step (no "outer" section) and `diloco` is DiLoCo's outer loop over the whole model (an
/// "outer" section without partitions): anything else is refused before the first algorithm
/// runs, rather than by each script peer.
void check_torch_config(const std::string& path, const TorchRow& row) {
    std::ifstream in(path);
    const auto doc = json::Json::parse(in, nullptr, false, true);
    const std::string algo = row.algorithm;
    const auto model = doc.is_object() && doc.contains("model") && doc["model"].is_object()
                           ? doc["model"].value("name", std::string())
                           : std::string();
    if (model != "softmax" && model != "mlp" && model != "gpt")
        refuse(fmt::format(
            "{}: model.name: {} ({}) has torch twins of softmax, mlp and gpt, not \"{}\"; leave "
            "{} out of --algorithms or use one of those models",
            path, algo, row.script, model, algo));
    if (doc.is_object() && doc.contains("multirate"))
        refuse(
            fmt::format("{}: multirate: {} trains every parameter at every step; leave {} out "
                        "of --algorithms or remove multirate",
                        path, algo, algo));
    const bool outer = doc.is_object() && doc.contains("outer");
    if (algo == "ddp" && outer)
        refuse(fmt::format(
            "{}: outer: ddp (bench/ddp_ref.py) all-reduces the gradients at every step and has "
            "no outer loop; list diloco in --algorithms for torch DiLoCo, or remove \"outer\"",
            path));
    if (algo == "ddp") check_ddp_options(path, doc);
    if (algo == "diloco" && !outer)
        refuse(fmt::format(
            "{}: outer: diloco (bench/diloco_ref.py) is DiLoCo's outer loop, and the config has "
            "no \"outer\" section; add one, e.g. \"outer\": {{\"steps\": 8, \"optimizer\": "
            "\"nesterov\", \"lr\": 0.7, \"momentum\": 0.9}}, or leave diloco out of --algorithms",
            path));
    if (algo == "diloco" && doc["outer"].is_object() && doc["outer"].contains("partitions"))
        refuse(fmt::format(
            "{}: outer.partitions: diloco (bench/diloco_ref.py) takes the outer step on the whole "
            "model; remove outer.partitions or leave diloco out of --algorithms",
            path));
    if (algo == "diloco" && doc["outer"].is_object() && doc["outer"].contains("seconds"))
        refuse(fmt::format(
            "{}: outer.seconds: diloco (bench/diloco_ref.py) is torch's DiLoCo, rounds of a fixed "
            "step count; give the torch row a config with \"steps\": H or leave diloco out of "
            "--algorithms",
            path));
}

// A torch row's script, absolute (its variable overrides the source tree's).
std::string torch_script(const TorchRow& row, const std::string& source_tree_path) {
    const char* env = std::getenv(row.env);
    const fs::path script = env && *env ? fs::path(env) : fs::path(source_tree_path);
    if (!fs::is_regular_file(script))
        refuse(fmt::format(
            "--algorithms: {} needs its script {}, which is not a file; set {} to {} of the "
            "source tree",
            row.algorithm, script.string(), row.env, row.script));
    return fs::absolute(script).string();
}

// The torch rows among the request's algorithms.
std::vector<TorchRow> torch_rows(const LaunchRequest& r) {
    std::vector<TorchRow> rows;
    for (const auto& row : kTorchRows)
        if (std::find(r.algorithms.begin(), r.algorithms.end(), row.algorithm) !=
            r.algorithms.end())
            rows.push_back(row);
    return rows;
}

// --hosts, --script and --checkpoint-every against each other and --inproc.
void check_hosts_and_script(LaunchJob& job, const LaunchRequest& r) {
    const int n = job.topology.n();
    if (r.hosts != "local" && r.hosts != "netns")
        refuse(fmt::format("--hosts: \"{}\" is not a kind of host; use local or netns", r.hosts));
    job.hosts = r.hosts;
    const bool netns = r.hosts == "netns";
    for (const auto& row : torch_rows(r)) {
        if (r.inproc)
            refuse(fmt::format(
                "--algorithms: {} runs torch processes ({}), not --inproc threads; leave out "
                "--inproc or {}",
                row.algorithm, row.script, row.algorithm));
        const auto given = r.torch_scripts.find(row.algorithm);
        job.torch_scripts[row.algorithm] =
            torch_script(row, given != r.torch_scripts.end() ? given->second : row.script);
    }
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
    job.out = r.out.value_or("out/launch");
    job.config =
        std::make_shared<const optim::TrainingConfig>(optim::load_training_config(job.config_path));
    const auto& cfg = *job.config;
    for (const auto& row : torch_rows(r)) check_torch_config(job.config_path, row);
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
    if (r.target && r.target_loss)
        refuse("gossamer launch: --target and --target-loss: give one time-to-target goal");
    // A flag wins over the config; of the config's, the accuracy.
    job.target = r.target ? r.target : r.target_loss ? std::nullopt : cfg.target_accuracy;
    if (job.target && !(*job.target > 0 && *job.target <= 1))
        refuse(fmt::format("--target: {} is not an accuracy in (0, 1]", *job.target));
    if (!job.target && (r.target_loss || cfg.target_loss)) {
        job.target = r.target_loss ? r.target_loss : cfg.target_loss;
        job.target_is_loss = true;
        if (!(*job.target > 0) || !std::isfinite(*job.target))
            refuse(fmt::format("--target-loss: {} is not a loss > 0", *job.target));
    }
    job.inproc = r.inproc;
    check_hosts_and_script(job, r);
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
        if (job.inproc || job.script || !job.torch_scripts.empty())
            refuse(fmt::format("--resume: resumes gossamer peer processes, not {}; leave it out",
                               job.inproc   ? "--inproc threads"
                               : job.script ? "--script peers"
                                            : job.torch_scripts.begin()->first));
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
    // Under "outer" a peer's steps are its rounds.
    std::int64_t per_peer = static_cast<std::int64_t>(data.train.size()) / n /
                            std::max<std::int64_t>(cfg.batch_size, 1) * job.epochs;
    if (cfg.outer && !cfg.outer->identity()) per_peer = optim::outer_rounds(per_peer, *cfg.outer);
    job.total_steps = per_peer * n;
    job.text = !data.test.vocabulary.empty();
}

}  // namespace gossamer::launch
