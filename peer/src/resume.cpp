// gossamer peer's checkpoints and resume (docs/operations/checkpoint.md): the header that ties a
// checkpoint to its job, the protocol's snapshots switched on, and a resume loaded and checked
// before the peer joins, so a checkpoint that does not fit is one line and exit 2 with nothing
// started.
#include <fmt/format.h>

#include <cstdio>

#include "gossamer/core/checkpoint_file.hpp"
#include "gossamer/core/digest.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/peer/checkpoints.hpp"
#include "gossamer/peer/job.hpp"

namespace gossamer::peer {

void prepare_checkpoints(PeerJob& job, const std::optional<std::filesystem::path>& resume,
                         std::optional<std::int64_t> wanted) {
    const int rank = job.rank, n = job.topology.n();
    const auto model = optim::build_model(job.config, job.data.train);
    CheckpointHeader h;
    h.job_id = job.job_id;
    h.algorithm = job.algorithm;
    h.rank = rank;
    h.n = n;
    h.model = model->describe();
    h.layout = optim::build_partitions(job.config, *model);
    // Everything the handshake compares but the cluster file (a resumed job may emulate
    // another cluster), the checkpoint interval and the resume step itself.
    Digest d;
    for (const auto& s : job.settings)
        if (s.field != "cluster file" && s.field != "resume step" &&
            s.field != "checkpoint interval")
            d.text(s.field).u64(s.digest);
    h.settings = d.value();
    std::string refusal = job.protocol->resume_refusal();
    if (refusal.empty() && !job.worker.trainer->checkpointable())
        refusal = fmt::format("algorithm {}: this worker cannot be checkpointed", job.algorithm);

    if (resume) {
        if (!refusal.empty())
            throw ConfigError("", "--resume", refusal, "start the job afresh without --resume");
        // A peer rejoining a running job (--join) takes its own newest checkpoint: the others
        // are not resuming, so there is no common step to agree on.
        const std::int64_t step = job.join_running
                                      ? own_resume_step(*resume, n, rank, wanted, "--resume")
                                      : resume_step(*resume, n, rank, wanted, "--resume");
        const std::string path = checkpoint_path(*resume, rank, step).string();
        const CheckpointFile file = load_checkpoint_file(path);
        if (const auto diff = checkpoint_mismatch(file.header, h); !diff.empty())
            throw ConfigError(path, "", fmt::format("a checkpoint of another job ({})", diff),
                              "resume with the topology, config, algorithm, epochs and job id of "
                              "the stopped job");
        if (file.header.step != step)
            throw ConfigError(
                path, "",
                fmt::format("holds step {} where its name says {}", file.header.step, step),
                "the file was renamed; resume from another step");
        job.protocol->restore(path, std::string_view(file.state.data(), file.state.size()));
        // Every peer must resume at the same cut: the handshake compares it (a peer started
        // afresh among resumed ones is refused as well). Not for a peer rejoining a running job.
        if (!job.join_running)
            job.settings.push_back(bootstrap::make_setting(
                "resume step", std::to_string(step), fmt::format("resumed at step {}", step),
                "give every peer the same --resume-step (or the same folder's checkpoints)"));
        std::fprintf(stderr, "[rank %d] resuming at step %lld of %lld from %s\n", rank,
                     static_cast<long long>(step), static_cast<long long>(job.worker.steps),
                     path.c_str());
    }
    if (job.checkpoint_every > 0) {
        if (refusal.empty()) {
            job.protocol->enable_checkpoints(job.checkpoint_every);
            job.checkpoint = h;
            // Every peer cuts at the same steps, or there is no step all of them hold (and an
            // async peer would wait at its cut for counts that never come): compared at the
            // handshake, not part of the job's digest (a resume may change it).
            job.settings.push_back(bootstrap::make_setting(
                "checkpoint interval", std::to_string(job.checkpoint_every),
                fmt::format("every {} steps", job.checkpoint_every),
                "give every peer the same --checkpoint-every (or output.checkpoint_every)"));
        } else {
            std::fprintf(stderr, "[rank %d] note: %s; only model checkpoints are written\n", rank,
                         refusal.c_str());
        }
    }
}

}  // namespace gossamer::peer
