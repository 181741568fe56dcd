#include "peer_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>

#include "gossamer/core/cluster.hpp"
#include "gossamer/peer/checkpoints.hpp"

namespace gossamer::launch {
namespace {

namespace fs = std::filesystem;

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

}  // namespace

std::pair<std::vector<std::string>, std::vector<std::pair<std::string, std::string>>> peer_command(
    const PeerSetup& s, int r, bool join) {
    const auto& job = s.job;
    const auto dir = job.out / s.algo;
    std::vector<std::string> argv = {s.exe,
                                     "peer",
                                     "--topology",
                                     s.topology,
                                     "--config",
                                     s.config,
                                     "--rank",
                                     std::to_string(r),
                                     "--algorithm",
                                     s.algo,
                                     "--epochs",
                                     std::to_string(job.epochs),
                                     "--out",
                                     dir.string(),
                                     "--job-id",
                                     std::to_string(s.job_id),
                                     "--eval-interval",
                                     fmt::format("{}", job.eval_interval),
                                     "--eval-samples",
                                     std::to_string(job.eval_samples)};
    if (s.cluster) argv.insert(argv.end(), {"--cluster", *s.cluster});
    // Known once the job took its first step: the ranks started later count from it.
    if (s.plan->timed && !s.job_start.empty())
        argv.insert(argv.end(), {"--job-start", s.job_start});
    if (job.checkpoint_every)
        argv.insert(argv.end(), {"--checkpoint-every", std::to_string(*job.checkpoint_every)});
    if (s.plan->active) {
        if (r == 0 && s.plan->present_at_start() < s.n)
            argv.insert(argv.end(), {"--min-peers", std::to_string(s.plan->present_at_start())});
        if (join) argv.emplace_back("--join");
        // A rank started again after its failure takes its model from its own newest
        // checkpoint, where it wrote one (docs/operations/elastic.md, "Checkpoints in an elastic
        // job"). (A resumed job passes --resume below: an option is given once,
        // docs/operations/cli.md.)
        if (join && s.resume == job.resume.end() && peer::list_checkpoints(dir, s.n).count(r))
            argv.insert(argv.end(), {"--resume", dir.string()});
    }
    if (s.resume != job.resume.end())
        argv.insert(argv.end(), {"--resume", dir.string(), "--resume-step",
                                 std::to_string(s.resume->second.step)});
    if (job.trace)
        argv.insert(argv.end(), {"--trace", peer_trace_path(job, s.algo, r).string(),
                                 "--trace-limit", fmt::format("{}", job.trace_limit / 1e6)});
    auto peer_env = s.env;
    if (s.script) {  // the same facts through the environment (gossamer.launched())
        argv = {job.python, *s.script};
        if (!s.torch_row) argv.insert(argv.end(), job.script_args.begin(), job.script_args.end());
        peer_env.insert(peer_env.end(),
                        {{"GOSSAMER_RANK", std::to_string(r)},
                         {"GOSSAMER_TOPOLOGY", s.topology},
                         {"GOSSAMER_CONFIG", s.config},
                         {"GOSSAMER_ALGORITHM", s.algo},
                         {"GOSSAMER_EPOCHS", std::to_string(job.epochs)},
                         {"GOSSAMER_OUT", dir.string()},
                         {"GOSSAMER_JOB_ID", std::to_string(s.job_id)},
                         {"GOSSAMER_EVAL_INTERVAL", fmt::format("{}", job.eval_interval)},
                         {"GOSSAMER_EVAL_SAMPLES", std::to_string(job.eval_samples)},
                         {"PYTHONPATH", python_path(s.exe)}});
        if (job.cluster) {  // a script pads its own steps (docs/operations/cli.md)
            const auto& spec = job.cluster->peers[static_cast<std::size_t>(r)];
            peer_env.insert(peer_env.end(), {{"GOSSAMER_CLUSTER", *s.cluster},
                                             {"GOSSAMER_STEP_TIME",
                                              fmt::format("{}", spec.base_time * spec.factor)}});
        }
        if (s.torch_row) {
            peer_env.insert(peer_env.end(), {{"RANK", std::to_string(r)},
                                             {"WORLD_SIZE", std::to_string(s.n)},
                                             {"MASTER_ADDR", s.master.master_addr},
                                             {"MASTER_PORT", std::to_string(s.master.port)}});
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
    return {std::move(argv), std::move(peer_env)};
}

}  // namespace gossamer::launch
