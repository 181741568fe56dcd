// gossamer peer: one real peer process over UCX (docs/operations/cli.md, docs/modules/peer.md). It
// joins the job through the bootstrap, trains with the Driver, takes part in the exact average of
// the survivors' models, and exits with a status a launcher can act on: 0 finished, 1 stopped, 2
// bad input, 3 the cluster file's emulated failure, 4 no result (not in the majority), 5 its loss
// or model became NaN or infinite (docs/operations/reliability.md).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include "algorithms.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "gossamer/bootstrap/environment.hpp"
#include "gossamer/bootstrap/launcher.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/core/compute_model.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/peer/cluster_options.hpp"
#include "gossamer/peer/job.hpp"
#include "gossamer/peer/settings.hpp"
#include "gossamer/peer/worker_setup.hpp"
#include "gossamer/topology/topology_file.hpp"

namespace gossamer::cli {
namespace {

const ArgParser& parser() {
    static const ArgParser p(
        "gossamer peer", "--topology T --config TRAIN [options]",
        "Runs one real peer of a job over UCX: rank R of the topology file's peers (it listens "
        "at peers[R]; rank 0 is the rendezvous). A topology file that gives only a count "
        "finds rank 0 from --rendezvous or the launcher instead "
        "(docs/operations/cluster-launchers.md). "
        "The rank comes from --rank, else from OMPI_COMM_WORLD_RANK (mpirun), PMI_RANK, "
        "SLURM_PROCID (srun) or RANK (torchrun); the job token from "
        "--token-file, else GOSSAMER_JOB_TOKEN (never a flag: ps shows flags). Every peer must be "
        "started with the same topology, "
        "config, algorithm and job id. Writes OUT/peer<R>.jsonl (the driver's metrics, one "
        "flushed line per step and a summary); the lowest surviving rank writes "
        "OUT/average.json and OUT/model.bin (the exact average of the survivors' models). Exit "
        "status: 0 finished, 1 stopped (a failed peer under all-reduce, a timeout, a transport "
        "or start-up failure), 2 bad input, 3 the cluster file's failure time was reached.",
        {{"topology", "FILE", "the topology file (rank r listens at its peers[r])"},
         {"config", "FILE", "the training config"},
         {"cluster", "FILE", "the cluster file to emulate (step times, links, failure time)"},
         {"rank", "R", "this peer's rank (default: from the launcher's environment)"},
         {"rendezvous", "HOST[:PORT]",
          "rank 0's address when the topology file gives only a count (default: "
          "GOSSAMER_RENDEZVOUS, MASTER_ADDR, Slurm's first node; port 29450)"},
         {"rendezvous-port", "PORT",
          "rank 0's port (default: GOSSAMER_RENDEZVOUS_PORT, else 29450)"},
         {"address", "HOST",
          "where this peer listens in a count-only job (default: every interface; it reports "
          "the address it reached rank 0 from)"},
         {"algorithm", "NAME",
          fmt::format("{} (default {})", algorithm_names(), proto::default_algorithm())},
         {"epochs", "N", "passes over this peer's shard (default: training.epochs)"},
         {"out", "DIR", "output folder (default: out/peer)"},
         {"token-file", "FILE",
          "a file holding the job token, one trailing newline stripped (default: "
          "$GOSSAMER_JOB_TOKEN)"},
         {"job-id", "N", "the job id; peers of other jobs are refused (default 1)"},
         {"checkpoint-every", "N",
          "write OUT/checkpoint-<R>-<S>.bin (the model) and OUT/checkpoint-<R>-<S>.state (the "
          "whole state at the job's cut, docs/operations/checkpoint.md) every N steps (default: "
          "output.checkpoint_every of the config; 0: none)"},
         {"resume", "DIR",
          "restart a stopped job from DIR's checkpoints: at the newest step every peer whose "
          "checkpoints are in DIR holds (docs/operations/checkpoint.md)"},
         {"resume-step", "S", "with --resume: this step instead of the newest common one"},
         {"min-peers", "K",
          "rank 0: when not every peer joined within --join-timeout but K did (itself "
          "included), start without the others, which may --join later (default: all)"},
         {"job-start", "T",
          "the job's time origin, unix seconds (gossamer launch sets it for a cluster file with "
          "churn): the cluster file's fail_at, leave_at and slow periods count from it instead of "
          "from this peer's start; a peer started after its fail_at (the launcher's restart at "
          "rejoin_at) does not fail again; with --min-peers, rank 0 does not wait for the ranks "
          "whose join_at is later than 0 (docs/operations/elastic.md)"},
         {"join", "",
          "enter a job that is already running (a late peer, or one restarted after a crash: "
          "with --resume DIR it takes its model from its own newest checkpoint there and its " +
              fmt::format("push-sum mass from a sponsor); {}; in a job that takes checkpoints it "
                          "writes its own from its first cut after entering "
                          "(docs/operations/elastic.md)",
                          proto::join_names(proto::elastic_algorithms(false, false), "and"))},
         {"eval-interval", "S",
          "evaluate this peer's own model every S seconds of its clock, at the first step "
          "boundary at or after each tick, and write {\"eval\": k, \"time\", \"accuracy\", "
          "\"loss\"} to OUT/peer<R>.jsonl (default 2)"},
         {"eval-samples", "N",
          "the first N test samples each evaluation uses (default 2000; 0: no evaluation "
          "points)"},
         {"join-timeout", "S", "seconds to wait for all peers at start-up (default 30)"},
         {"timeout", "S", "stop when nothing happens for S seconds (default 120)"},
         {"average-timeout", "S",
          "seconds for the final average, waiting for the survivors "
          "still training included (default 600)"},
         {"trace", "FILE",
          "write this peer's timeline (Chrome trace / Perfetto JSON, docs/formats/trace.md) to "
          "FILE"},
         {"trace-limit", "MB",
          "bound on the trace's events (default 64); past it whole steps are sampled"},
         {"json", "",
          "print a JSON summary on stdout at the end (with the average on the rank "
          "that evaluates it)"}},
        0);
    return p;
}

std::string check_algorithm(const std::string& name) {
    const auto known = proto::protocol_names();
    if (std::find(known.begin(), known.end(), name) != known.end()) return name;
    std::string all;
    for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
    throw UsageError(
        fmt::format("--algorithm: unknown algorithm \"{}\"; use one of {}", name, all));
}

std::chrono::milliseconds seconds_option(const ParsedArgs& a, const char* name, double fallback) {
    const double s = a.number(name, fallback);
    if (!(s > 0) || s > 1e6)
        throw UsageError(fmt::format("--{}: {} is not a positive number of seconds", name, s));
    return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
}

// --job-start T: unix seconds, not in the future (beyond a clock's jitter), with --cluster.
std::optional<std::chrono::system_clock::time_point> job_start_option(const ParsedArgs& a,
                                                                      bool cluster) {
    if (!a.value("job-start")) return std::nullopt;
    const double t = a.number("job-start", 0);
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (!(t > 0))
        throw UsageError(fmt::format(
            "--job-start: {} is not a time; give the unix time in seconds at which the job "
            "started (gossamer launch sets it)",
            *a.value("job-start")));
    if (t > now + 5)
        throw UsageError(fmt::format(
            "--job-start: {} is {:.0f} s in the future; give the unix time in seconds at which "
            "the job started (gossamer launch sets it)",
            *a.value("job-start"), t - now));
    if (!cluster)
        throw UsageError(
            "--job-start: it is the clock of the cluster file's fail_at and leave_at; give "
            "--cluster FILE with it, or leave it out");
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(t)));
}

}  // namespace

int run_peer(const std::vector<std::string>& args) {
    // The token is a secret: a flag would show it to every user of the host in ps.
    for (const auto& arg : args)
        if (arg == "--token" || arg.rfind("--token=", 0) == 0)
            throw UsageError(
                "--token: a job token on the command line shows in ps to every user of the "
                "host; put it in a file (--token-file FILE) or in GOSSAMER_JOB_TOKEN");
    const auto& p = parser();
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    for (const char* req : {"topology", "config"})
        if (!a.value(req))
            throw UsageError(fmt::format("gossamer peer: --{} FILE is required", req));
#ifndef GOSSAMER_HAVE_UCX
    throw UsageError(
        "gossamer peer: this build has no UCX backend; rebuild with "
        "-DGOSSAMER_USE_UCX=ON");
#else
    // Everything is loaded and checked before the peer joins or writes anything (exit 2).
    peer::PeerJob job;
    job.topology = topology::load_topology(*a.value("topology"));
    const int n = job.topology.n();
    std::optional<int> explicit_rank;
    if (a.value("rank")) explicit_rank = static_cast<int>(a.integer("rank", 0, -1, 1 << 30));
    std::optional<int> rdv_port;
    if (a.value("rendezvous-port"))
        rdv_port = static_cast<int>(a.integer("rendezvous-port", 0, 1, 65535));
    const auto launch = bootstrap::discover_launch({explicit_rank, a.value("rendezvous"), rdv_port,
                                                    a.value("address"), job.topology.count_only},
                                                   n);
    job.rank = launch.rank;
    if (launch.rendezvous) {  // a count-only job: addresses from the rendezvous
                              // (docs/modules/peer.md)
        job.topology.peers.clear();
        for (const auto& e :
             bootstrap::rendezvous_peers(*launch.rendezvous, job.rank, n, a.value("address")))
            job.topology.peers.push_back({e.host, e.port});
        std::fprintf(stderr, "[rank %d] rendezvous at %s (%s)\n", job.rank,
                     launch.rendezvous->str().c_str(), launch.rendezvous_source.c_str());
    }
    job.algorithm = check_algorithm(a.value("algorithm").value_or(proto::default_algorithm()));
    std::shared_ptr<const Cluster> cluster;  // null: natural speed
    if (a.value("cluster"))
        cluster = std::make_shared<const Cluster>(load_cluster(*a.value("cluster"), n));
    job.config = optim::load_training_config(*a.value("config"));
    const auto& cfg = job.config;
    job.epochs = static_cast<int>(a.integer("epochs", cfg.epochs, 1, 100000));
    job.out = a.value("out").value_or("out/peer");
    job.token = bootstrap::job_token(a.value("token-file").value_or(""));
    job.job_id = static_cast<std::uint64_t>(a.integer("job-id", 1, 0, INT64_MAX));
    job.checkpoint_every = a.integer("checkpoint-every", cfg.checkpoint_every, 0, INT64_MAX);
    job.json = a.flag("json");
    if (cluster && std::isfinite(cluster->peers[static_cast<std::size_t>(job.rank)].leave_at))
        if (const auto why = proto::elastic_refusal(job.algorithm); !why.empty())
            throw UsageError(
                fmt::format("{}: rank {}'s leave_at: {}", *a.value("cluster"), job.rank, why));
    job.join_running = a.flag("join");
    job.min_peers = static_cast<int>(a.integer("min-peers", 0, 1, n));
    const auto job_start = job_start_option(a, cluster != nullptr);
    if (cluster && job.min_peers > 0)  // the ranks the launcher starts later
        for (int r = 1; r < n; ++r)
            if (cluster->peers[static_cast<std::size_t>(r)].join_at > 0)
                job.late_ranks.push_back(r);
    if (job.join_running) {
        if (const auto why = proto::elastic_refusal(job.algorithm); !why.empty())
            throw UsageError("--join: " + why);
    }
    job.eval_interval = eval_interval_option(a);
    job.eval_samples = a.integer("eval-samples", 2000, 0, INT64_MAX);
    job.join_timeout = seconds_option(a, "join-timeout", 30);
    job.stall_timeout = seconds_option(a, "timeout", 120);
    job.average_timeout = seconds_option(a, "average-timeout", 600);
    set_blas_threads(cfg.threads);
    job.data = optim::load_training_data(cfg);
    check_algorithms({job.algorithm}, &cfg, &job.data.train, job.topology.schedule, 0);
    job.worker = peer::make_training_worker(cfg, job.data.train, job.rank, n, job.epochs);
    const auto options = cfg.algorithm_options(job.algorithm);
    proto::PeerContext ctx{
        job.rank, n, job.topology.schedule, job.worker.trainer.get(), job.worker.steps, cluster};
    ctx.value_bound = cfg.value_bound;  // docs/operations/reliability.md
    job.protocol = proto::make_protocol(job.algorithm, options ? &*options : nullptr, ctx);
    // With its options: dpsgd with delay, reweight, partition_ready or multirate cannot join
    // or leave (the algorithm's name alone can).
    const bool elastic_use =
        job.join_running ||
        (cluster && std::isfinite(cluster->peers[static_cast<std::size_t>(job.rank)].leave_at));
    if (elastic_use)
        if (const auto why = job.protocol->elastic_refusal(); !why.empty())
            throw UsageError(job.join_running ? "--join: " + why
                                              : fmt::format("{}: rank {}'s leave_at: {}",
                                                            *a.value("cluster"), job.rank, why));
    // SIGTERM: a graceful leave where the algorithm can leave (docs/operations/elastic.md); a
    // second SIGTERM, or one to any other algorithm, ends the process as before.
    if (job.protocol->elastic_refusal().empty()) peer::leave_on_sigterm();
    // What the handshake compares, one digest per field (docs/modules/bootstrap.md).
    using peer::SettingSource;
    peer::add_topology_settings(job.settings, job.topology, SettingSource::cli);
    peer::add_algorithm_settings(job.settings, job.algorithm, options ? &options->value() : nullptr,
                                 SettingSource::cli);
    const auto* rates = job.worker.trainer->multirate();
    peer::add_partition_settings(job.settings, rates ? *rates : optim::Multirate(),
                                 SettingSource::cli);
    peer::add_training_settings(job.settings, cfg, job.epochs);
    peer::add_cluster_setting(job.settings, a.value("cluster").value_or(""));
    std::optional<std::int64_t> resume_step;
    if (a.value("resume-step")) {
        if (!a.value("resume")) throw UsageError("--resume-step: give --resume DIR with it");
        resume_step = a.integer("resume-step", 0, 1, INT64_MAX);
    }
    std::optional<std::filesystem::path> resume;
    if (const auto dir = a.value("resume")) resume = *dir;
    peer::prepare_checkpoints(job, resume, resume_step);
    std::shared_ptr<const ComputeModel> compute;
    if (cluster) compute = std::make_shared<const ComputeModel>(*cluster, cfg.seed);
    job.driver = peer::options_for(job.rank, cluster, compute,
                                   (job.out / fmt::format("peer{}.jsonl", job.rank)).string());
    job.driver.stall_timeout = job.stall_timeout;
    if (job_start) {
        job.driver.job_start = job_start;
        // The launcher restarts a crashed rank at its rejoin_at: that process has had its
        // failure already.
        const double now =
            std::chrono::duration<double>(std::chrono::system_clock::now() - *job_start).count();
        if (std::isfinite(job.driver.fail_at) && now >= job.driver.fail_at) {
            std::fprintf(stderr,
                         "[rank %d] started %.2f s into the job, after its failure time %g s "
                         "(cluster file): this process does not fail again\n",
                         job.rank, now, job.driver.fail_at);
            job.driver.fail_at = std::numeric_limits<double>::infinity();
        }
    }
    // A short --timeout still shows the watchdog's line (what the peer waits for) first.
    job.driver.watchdog = std::min(job.driver.watchdog, job.stall_timeout);
    if (const auto trace = a.value("trace")) {
        trace::check_writable(*trace, "--trace");
        job.driver.trace_path = *trace;
    }
    job.driver.trace_limit = trace_limit_bytes(a);
    // Every file this peer may write is checked before it joins (a refusal after the start-up
    // barrier would leave the others waiting for it). The peers of a job share the folder:
    // nothing in it is removed, each peer overwrites its own files (docs/operations/cli.md).
    const auto own = fmt::format("peer{}.jsonl", job.rank);
    const bool earlier = std::filesystem::exists(job.out / own);
    prepare_output_dir(job.out, "gossamer peer", {"", "--out"}, OutputUse::share,
                       {own, "model.bin", "model.bin.tmp", "average.json", "average.json.tmp"});
    if (earlier)
        std::fprintf(stderr, "[rank %d] note: %s is from an earlier run; this peer replaces it\n",
                     job.rank, (job.out / own).c_str());
    return peer::run_peer_job(job);
#endif
}

}  // namespace gossamer::cli
