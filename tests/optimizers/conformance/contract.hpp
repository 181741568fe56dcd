#pragma once
/// The contract every registered protocol is held to (docs/algorithms/protocol-contract.md,
/// "Conformance"), as checks that run one candidate and report what they found. A check never
/// names an algorithm: it asks the candidate (does it accept this topology, does it hold mass,
/// does it resume) and runs it through the one harness (optimizers/harness/harness.hpp).
/// Each check returns a Report: its findings (empty: the candidate conforms) and a note saying
/// what was compared or why the check does not apply.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/harness.hpp"

namespace gossamer::conformance {

/// A protocol under test: a registered algorithm, or one a test builds (a broken one).
struct Candidate {
    std::string name;
    /// One peer's protocol with these options (nullptr: the defaults); throws ConfigError for
    /// bad ones.
    std::function<std::unique_ptr<proto::Protocol>(const json::Node*, proto::PeerContext)> make;
};

/// Every algorithm of the registry (proto::protocol_names(), built by proto::make_protocol).
std::vector<Candidate> registered();

/// The job a check runs: n peers on quadratics f_r(x) = |x - b_r|^2 / 2 from random starts.
struct Job {
    int n = 8;
    std::size_t dim = 8;
    std::int64_t steps = 12;
    std::uint64_t seed = 3;
    std::shared_ptr<const topology::Schedule> topology;
    std::string topology_label;  ///< e.g. "one_peer_exponential, uniform weights"
};

/// The first topology of a fixed list (one-peer exponential and ring, with uniform and with
/// push-sum weights) on which every rank of the candidate builds with its defaults: the
/// candidate says what it accepts. Throws std::runtime_error naming every refusal when none.
Job job_for(const Candidate& c, int n = 8);

/// The harness's options for a job: virtual seconds, jittered steps and delays, FIFO channels.
testing::HarnessOptions harness_options(const Job& job);
/// The job's peers: QuadraticWorkers and the candidate's protocol with `options` (kept alive by
/// the caller; nullptr: defaults).
testing::Peers peers(const Candidate& c, const Job& job, const json::Node* options = nullptr);

struct Report {
    std::vector<std::string> findings;  ///< each a violation of the contract; empty: conforms
    std::string note;                   ///< what was compared, or why the check did not apply
    bool ok() const { return findings.empty(); }
};

/// (a) The same seed gives the same bytes: two runs send the same messages (every header field
/// and payload byte, in order) and end with the same models, bit for bit.
Report same_seed_same_bytes(const Candidate& c);
/// An averaging protocol (one that holds no push-sum mass) ends with the same models whatever
/// the order its messages arrive in (two seeds of the harness's jitter): what lets `gossamer
/// sim` and real peers agree bit for bit. Push-sum protocols absorb shares as they come, so
/// their models depend on the order: the note says so.
Report order_independent(const Candidate& c);
/// (c) The ownership rule: between start_step and step_finished the protocol neither writes
/// the compute point, x or the gradient buffer (the harness checks every step) nor reads the
/// gradient (it is poisoned with NaN while the step runs: the models must be the unpoisoned
/// run's, bit for bit).
Report ownership(const Candidate& c);
/// (d) A neighbour fails mid-run: nobody hangs; either every survivor takes all its steps
/// (gossip goes on) or every survivor stops early naming the failed rank (all-reduce).
Report neighbour_failure(const Candidate& c);
/// (e) Bad options (an unknown key, a list, a string) are each one ConfigError line; {} is
/// accepted.
Report bad_options(const Candidate& c);
/// (f) Checkpoint and restore: where resume_refusal() is empty, every peer resumed from its
/// snapshot at a cut ends as the uninterrupted run did: bit for bit, or for a push-sum protocol
/// with the mass exact.
Report checkpoint_round_trip(const Candidate& c);
/// (g) Push-sum mass is exact: for a protocol that holds mass, the mass held by every peer
/// (held_mass) plus the weight of every message in flight is n after every event.
Report mass_exact(const Candidate& c);

/// The seam of the layers around a protocol (the outer optimizer of the next issues): under a
/// pass-through layer (optimizers/harness/layers.hpp) the candidate sends the same bytes and
/// ends with the same models.
Report layered(const Candidate& c);

/// (d) helper: the rank a stopped protocol names as the failure that stopped it, if any.
std::optional<int> failure_named(const proto::Protocol& p);

}  // namespace gossamer::conformance
