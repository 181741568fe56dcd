// gossamer peer: one real peer process over UCX (docs/operations/cli.md, docs/modules/peer.md). It
// joins the job through the bootstrap, trains with the Driver, takes part in the exact average of
// the survivors' models, and exits with a status a launcher can act on: 0 finished, 1 stopped, 2
// bad input, 3 the cluster file's emulated failure, 4 no result (not in the majority), 5 its loss
// or model became NaN or infinite (docs/operations/reliability.md). Parses the flags into a
// peer::PeerJob; its assembly and run are peer/'s (gossamer/peer/job_setup.hpp).
#include <fmt/format.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>

#include "algorithms.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "peer_options.hpp"
#ifdef GOSSAMER_HAVE_UCX
#include "gossamer/bootstrap/environment.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/peer/job_setup.hpp"
#include "gossamer/topology/topology_file.hpp"
#endif

namespace gossamer::cli {

int run_peer(const std::vector<std::string>& args) {
    // The token is a secret: a flag would show it to every user of the host in ps.
    for (const auto& arg : args)
        if (arg == "--token" || arg.rfind("--token=", 0) == 0)
            throw UsageError(
                "--token: a job token on the command line shows in ps to every user of the "
                "host; put it in a file (--token-file FILE) or in GOSSAMER_JOB_TOKEN");
    const auto& p = peer_parser();
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
    bootstrap::LaunchRequest where;
    if (a.value("rank")) where.rank = static_cast<int>(a.integer("rank", 0, -1, 1 << 30));
    if (a.value("rendezvous-port"))
        where.rendezvous_port = static_cast<int>(a.integer("rendezvous-port", 0, 1, 65535));
    where.rendezvous = a.value("rendezvous");
    where.address = a.value("address");
    peer::place_peer(job, where);
    job.algorithm = check_algorithm(a.value("algorithm").value_or(proto::default_algorithm()));
    if (const auto cluster = a.value("cluster")) {
        job.cluster = std::make_shared<const Cluster>(load_cluster(*cluster, n));
        job.cluster_path = *cluster;
    }
    job.config = optim::load_training_config(*a.value("config"));
    job.epochs = static_cast<int>(a.integer("epochs", job.config.epochs, 1, 100000));
    job.out = a.value("out").value_or("out/peer");
    job.token = bootstrap::job_token(a.value("token-file").value_or(""));
    job.job_id = static_cast<std::uint64_t>(a.integer("job-id", 1, 0, INT64_MAX));
    job.checkpoint_every = a.integer("checkpoint-every", job.config.checkpoint_every, 0, INT64_MAX);
    job.json = a.flag("json");
    job.join_running = a.flag("join");
    job.min_peers = static_cast<int>(a.integer("min-peers", 0, 1, n));
    job.job_start = job_start_option(a, job.cluster != nullptr);
    peer::check_peer_job(job);
    job.eval_interval = eval_interval_option(a);
    job.eval_samples = a.integer("eval-samples", 2000, 0, INT64_MAX);
    job.join_timeout = seconds_option(a, "join-timeout", 30);
    job.stall_timeout = seconds_option(a, "timeout", 120);
    job.average_timeout = seconds_option(a, "average-timeout", 600);
    if (a.value("resume-step")) {
        if (!a.value("resume")) throw UsageError("--resume-step: give --resume DIR with it");
        job.resume_step = a.integer("resume-step", 0, 1, INT64_MAX);
    }
    if (const auto dir = a.value("resume")) job.resume = *dir;
    job.trace_path = a.value("trace").value_or("");
    job.trace_limit = trace_limit_bytes(a);
    peer::load_peer_data(job);
    check_algorithms({job.algorithm}, &job.config, &job.data.train, job.topology.schedule, 0);
    peer::assemble_peer_job(job);
    return peer::run_peer_job(job);
#endif
}

}  // namespace gossamer::cli
