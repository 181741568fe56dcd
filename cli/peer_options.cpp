// gossamer peer's flags: the parser with its help, and the flags that need more than a number
// (cli/peer_command.cpp uses them).
#include "peer_options.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "algorithms.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"

namespace gossamer::cli {

const ArgParser& peer_parser() {
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
         {"algorithm", "NAME", algorithm_names() + " (default " + proto::default_algorithm() + ")"},
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
          "with --resume DIR it takes its model from its own newest checkpoint there and its "
          "push-sum mass from a sponsor); " +
              proto::join_names(proto::elastic_algorithms(false, false), "and") +
              "; in a job that takes checkpoints it writes its own from its first cut after "
              "entering (docs/operations/elastic.md)"},
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

}  // namespace gossamer::cli
