#pragma once
/// gossamer::Peer: join a gossip job from a training loop you own (docs/library/api.md).
///
/// Your program keeps its model, its data and its optimizer. It hands Gossamer a flat fp32
/// parameter vector P (and optionally its partitions); after each local step of its own optimizer
/// it calls step(loss). Gossamer then treats the change the step made, P_before - P, as the
/// "gradient" of the algorithm's local step (applied with plain SGD at rate 1), runs the
/// algorithm's communication (all-reduce, D-PSGD mixing, push-sum shares, ...), and writes the
/// point of the next local step back into P before step() returns.
///
///     gossamer::PeerOptions o;
///     o.topology = "ring4.json";            // the peers and the graph
///     o.algorithm = "dpsgd";
///     o.steps = 500;                        // local steps this peer takes
///     gossamer::Peer peer(o, params);       // joins; params now hold the first point
///     do {
///         double loss = my_forward_backward(params, grad);
///         my_optimizer_step(params, grad);
///     } while (peer.step(loss));            // false after the last step: params = final model
///     gossamer::PeerMetrics m = peer.finish();
///
/// P is read and written only inside the constructor, step() and finish(), on the caller's
/// thread; the algorithm's own copy lives on a background communication thread. Every blocking
/// call has a timeout (PeerOptions). Errors are exceptions whose message is one line:
/// ConfigError (bad file or option), PeerFailure (a neighbour died under all-reduce; rank()
/// names it), Timeout, TransportError.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/partition.hpp"
#include "gossamer/optimizers/outer/outer_options.hpp"

namespace gossamer {

/// N peers as threads of one process over the in-process transport (tests, notebooks): create
/// one and give it to the PeerOptions of each of the N peers.
class InprocJob;
/// A job for `n` peers (the topology file's peer count). Throws ConfigError when n < 1.
std::shared_ptr<InprocJob> make_inproc_job(int n);

/// The number of peers of a topology file (loads and validates it; ConfigError as the CLI's).
int peer_count(const std::string& topology_file);

enum class PeerTransport {
    ucx,     ///< real processes: TCP bootstrap at the topology file's host:port, then UCX
    inproc,  ///< threads of one process sharing PeerOptions::inproc
};

/// The registry's default algorithm (gossamer peer's default too; docs/algorithms/README.md).
std::string default_algorithm();

struct PeerOptions {
    std::string topology;     ///< topology file (docs/formats/topology-format.md): peers and graph
    std::optional<int> rank;  ///< nullopt: OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID
    std::string algorithm = default_algorithm();  ///< a registered name (docs/algorithms/)
    /// The algorithm's options as JSON object text (docs/algorithms/async.md), "" for the defaults.
    std::string algorithm_options;
    /// Per-partition gossip, as the training config's "multirate" section (JSON object text;
    /// dpsgd and choco): {"partitions": {"head": {"gossip_period": 4}}}. "" for none.
    std::string partitions;
    /// Local steps this peer takes (> 0). Under allreduce every peer must take the same number.
    std::int64_t steps = 0;
    std::string token_file;  ///< ucx: the job token's file; "" for $GOSSAMER_JOB_TOKEN
    std::uint64_t job_id = 1;
    PeerTransport transport = PeerTransport::ucx;
    /// Where `params` live (docs/operations/gpu.md, "Parameters on the device"): "cpu" (host
    /// memory); "cuda" (a pointer to memory of the CUDA device current on the thread that
    /// constructs the Peer: the round's work runs on that GPU and only message payloads are staged
    /// through host memory; every algorithm; needs a build with CUDA); "emulated" (for tests
    /// without a GPU: host pages that only Gossamer's device calls can touch; allocate `params`
    /// from gossamer::proto::emulated_device()).
    std::string device = "cpu";
    std::shared_ptr<InprocJob> inproc;  ///< transport == inproc: the shared job

    /// All n peers joined and the handshake (model size, partitions, topology, algorithm and
    /// its options, multirate partitions, exact_average) matched.
    std::chrono::milliseconds join_timeout{30'000};
    /// One step() call: handing over the update until the next point is back.
    std::chrono::milliseconds step_timeout{180'000};
    /// The communication side: no progress for this long throws Timeout (a local step of yours
    /// must take less).
    std::chrono::milliseconds stall_timeout{120'000};
    /// The whole job, and finish() waiting for the others to finish.
    std::chrono::milliseconds run_timeout{std::chrono::hours(24)};
    /// JSON-lines metrics per step and a summary at the end (docs/modules/peer.md, "Metrics"); ""
    /// none.
    std::string metrics_path;
    /// The peer's timeline (Chrome trace / Perfetto JSON, docs/formats/trace.md), written when the
    /// communication side ends; "" none. trace_limit bounds its events in bytes (at least
    /// 10,000).
    std::string trace_path;
    std::size_t trace_limit = 64'000'000;
    /// After the last step, every surviving peer ends with the exact average of the survivors'
    /// models (push-sum mass weighted; one ring all-reduce, docs/modules/peer.md): step() waits for
    /// it.
    bool exact_average = false;
    /// Seconds between evaluation points of your model (evaluation_due(), docs/library/api.md); 0:
    /// none.
    double eval_interval = 0;
    /// Local updates and an outer optimizer (the training config's "outer" section,
    /// docs/algorithms/outer.md; docs/library/api.md, "Outer rounds"): your optimizer becomes
    /// the inner one. Your `steps` step() calls are inner steps, taken in rounds of outer->steps
    /// from the anchor; the algorithm mixes each round's pseudo-gradient and the outer step
    /// moves the anchor, which is the point step() hands back after a round's last inner step.
    /// nullopt (or the identity: one step, sgd, lr 1, no momentum): every step is a round.
    /// Host memory only (device "cpu"); not with `partitions`. Every peer must give the same.
    std::optional<optim::OuterOptions> outer;
};

/// What the peer has done so far (a snapshot at the last step boundary; final after the last
/// step).
struct PeerMetrics {
    int rank = 0;
    int n = 0;
    std::string algorithm;
    std::int64_t steps = 0;   ///< local steps handed over with step() (inner steps under outer)
    std::int64_t rounds = 0;  ///< communication rounds completed (outer rounds under outer)
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    std::uint64_t messages_sent = 0, messages_received = 0;
    /// bytes_sent by partition id (the layout's order; whole-model algorithms send all as 0)
    std::vector<std::uint64_t> partition_bytes_sent;
    double loss = 0;             ///< the last loss handed to step()
    double compute_seconds = 0;  ///< your loop: from each return of step() to the next call
    double wait_seconds = 0;     ///< blocked inside step(): communication you waited for
    double mass = 1;             ///< push-sum weight held (1 for averaging algorithms)
    double mass_lost = 0;        ///< push-sum mass that went with failed peers
    std::vector<int> failed_peers;
    json::Json edges;  ///< per neighbour: weights in use, staleness (the protocol's edge metrics)
    bool finished = false;        ///< the last step is done
    std::vector<int> average_of;  ///< exact_average: the ranks averaged (the survivors)
};

class Peer {
  public:
    /// Validates the options (one-line ConfigError, nothing started), joins the job (all n
    /// peers, same parameter count and partitions) and writes the first point into `params`.
    /// Every peer must start from the same parameters (same seed), as built-in models do.
    /// `params` must stay valid until finish() or the destructor; `layout` names its partitions
    /// (default: one partition over all of it).
    Peer(PeerOptions options, std::span<float> params, PartitionLayout layout = {});
    /// Leaves the job: waits for the others as finish() does when the last step was taken,
    /// otherwise stops at once (the others see this peer fail). Never throws.
    ~Peer();
    Peer(const Peer&) = delete;
    Peer& operator=(const Peer&) = delete;

    /// After your optimizer's step: hands over the update of this step and returns with the
    /// next point in `params`. Returns false after the last step (PeerOptions::steps): `params`
    /// then hold this peer's final model (push-sum: de-biased). Throws what ended the job.
    bool step(double loss);
    /// Ends this peer's part: steps not taken yet are taken with a zero update (so all-reduce
    /// neighbours neither stall nor fail), then waits for the others to finish. `params` hold
    /// the final model. Returns the final metrics; throws what ended the job.
    PeerMetrics finish();
    /// Any thread.
    PeerMetrics metrics() const;

    /// Evaluation points (docs/library/api.md), as `gossamer peer` writes them: true once per tick
    /// k * PeerOptions::eval_interval seconds since the first point (tick 0 at the first call),
    /// when a tick has passed since the last point; then evaluate your model and hand the
    /// result to record_evaluation() before the next step(). Your thread; false without an
    /// interval or after finish().
    bool evaluation_due();
    /// Writes the point of the tick evaluation_due() reported into the metrics file
    /// (PeerOptions::metrics_path): {"rank","eval","time","at","accuracy","loss"}, where time
    /// is the tick's and at when it was recorded. `gossamer launch` times its target from these.
    /// Error when no point is due.
    void record_evaluation(double accuracy, double loss);

    int rank() const noexcept;
    int size() const noexcept;
    /// step() calls left before the last one returns false.
    std::int64_t steps_left() const noexcept;

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace gossamer
