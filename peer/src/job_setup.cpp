// gossamer peer's job, assembled from its checked inputs before it joins (job_setup.hpp).
#include "gossamer/peer/job_setup.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "gossamer/core/blas.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/peer/cluster_options.hpp"
#include "gossamer/peer/settings.hpp"

namespace gossamer::peer {
namespace {

bool leaves_at(const PeerJob& job) {
    return job.cluster &&
           std::isfinite(job.cluster->peers[static_cast<std::size_t>(job.rank)].leave_at);
}

// "--join: WHY" or "CLUSTER: rank R's leave_at: WHY", one line.
[[noreturn]] void refuse_elastic(const PeerJob& job, bool join, const std::string& why) {
    throw ConfigError(
        "", "",
        join ? "--join: " + why
             : fmt::format("{}: rank {}'s leave_at: {}", job.cluster_path, job.rank, why));
}

}  // namespace

void place_peer(PeerJob& job, bootstrap::LaunchRequest where) {
    const int n = job.topology.n();
    where.count_only = job.topology.count_only;
    const auto launch = bootstrap::discover_launch(where, n);
    job.rank = launch.rank;
    if (!launch.rendezvous) return;
    // A count-only job: addresses from the rendezvous (docs/modules/peer.md).
    job.topology.peers.clear();
    for (const auto& e :
         bootstrap::rendezvous_peers(*launch.rendezvous, job.rank, n, where.address))
        job.topology.peers.push_back({e.host, e.port});
    std::fprintf(stderr, "[rank %d] rendezvous at %s (%s)\n", job.rank,
                 launch.rendezvous->str().c_str(), launch.rendezvous_source.c_str());
}

void check_peer_job(PeerJob& job) {
    if (leaves_at(job))
        if (const auto why = proto::elastic_refusal(job.algorithm); !why.empty())
            refuse_elastic(job, false, why);
    if (job.cluster && job.min_peers > 0)  // the ranks the launcher starts later
        for (int r = 1; r < job.topology.n(); ++r)
            if (job.cluster->peers[static_cast<std::size_t>(r)].join_at > 0)
                job.late_ranks.push_back(r);
    if (job.join_running)
        if (const auto why = proto::elastic_refusal(job.algorithm); !why.empty())
            refuse_elastic(job, true, why);
}

void load_peer_data(PeerJob& job) {
    set_blas_threads(job.config.threads);
    job.data = optim::load_training_data(job.config);
}

void assemble_peer_job(PeerJob& job) {
    const auto& cfg = job.config;
    const int n = job.topology.n();
    job.worker = optim::make_training_worker(cfg, job.data.train, job.rank, n, job.epochs);
    const auto options = cfg.algorithm_options(job.algorithm);
    proto::PeerContext ctx{
        job.rank,         n,          job.topology.schedule, &job.worker.protocol_worker(),
        job.worker.steps, job.cluster};
    ctx.value_bound = cfg.value_bound;  // docs/operations/reliability.md
    job.protocol = proto::make_protocol(job.algorithm, options ? &*options : nullptr, ctx);
    // With its options: dpsgd with delay, reweight, partition_ready or multirate cannot join
    // or leave (the algorithm's name alone can).
    if (job.join_running || leaves_at(job))
        if (const auto why = job.protocol->elastic_refusal(); !why.empty())
            refuse_elastic(job, job.join_running, why);
    // SIGTERM: a graceful leave where the algorithm can leave (docs/operations/elastic.md); a
    // second SIGTERM, or one to any other algorithm, ends the process as before.
    if (job.protocol->elastic_refusal().empty()) leave_on_sigterm();
    // What the handshake compares, one digest per field (docs/modules/bootstrap.md).
    add_topology_settings(job.settings, job.topology, SettingSource::cli);
    add_algorithm_settings(job.settings, job.algorithm, options ? &options->value() : nullptr,
                           SettingSource::cli);
    const auto* rates = job.worker.trainer->multirate();
    add_partition_settings(job.settings, rates ? *rates : optim::Multirate(), SettingSource::cli);
    add_training_settings(job.settings, cfg, job.epochs);
    add_cluster_setting(job.settings, job.cluster_path);
    prepare_checkpoints(job, job.resume, job.resume_step);
    DriverSpec spec;
    spec.rank = job.rank;
    spec.cluster = job.cluster;
    spec.seed = cfg.seed;
    spec.metrics_path = (job.out / fmt::format("peer{}.jsonl", job.rank)).string();
    spec.stall_timeout = job.stall_timeout;
    spec.job_start = job.job_start;
    spec.trace_path = job.trace_path;
    spec.trace_limit = job.trace_limit;
    job.driver = driver_options(spec);
    if (!job.trace_path.empty()) trace::check_writable(job.trace_path, "--trace");
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
}

}  // namespace gossamer::peer
