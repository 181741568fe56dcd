// The candidates, the job a check runs and the topology each candidate accepts (contract.hpp).
#include <stdexcept>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "gossamer/optimizers/protocols/qallreduce/qallreduce.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/conformance/contract.hpp"
#include "optimizers/harness/workers.hpp"

namespace gossamer::conformance {

std::vector<Candidate> registered() {
    std::vector<Candidate> out;
    for (const auto& name : proto::protocol_names())
        out.push_back({name, [name](const json::Node* options, proto::PeerContext ctx) {
                           return proto::make_protocol(name, options, std::move(ctx));
                       }});
    return out;
}

Job job_for(const Candidate& c, int n) {
    struct Choice {
        const char* family;
        topology::WeightRule rule;
        const char* label;
    };
    // Averaging protocols take doubly-stochastic weights, push-sum ones column-stochastic
    // weights; a chain in rank order (gadmm) is a ring.
    const Choice choices[] = {
        {"one_peer_exponential", topology::WeightRule::uniform, "uniform weights"},
        {"one_peer_exponential", topology::WeightRule::push_sum, "push-sum weights"},
        {"ring", topology::WeightRule::uniform, "uniform weights"},
        {"ring", topology::WeightRule::push_sum, "push-sum weights"},
    };
    std::string refusals;
    for (const Choice& choice : choices) {
        topology::FamilySpec spec;
        spec.family = choice.family;
        spec.n = n;
        spec.weights = choice.rule;
        Job job;
        job.n = n;
        job.topology_label = std::string(choice.family) + ", " + choice.label;
        try {
            job.topology = topology::generate(spec);
            for (int r = 0; r < n; ++r) {
                testing::QuadraticWorker worker(std::vector<float>(job.dim));
                c.make(nullptr, {r, n, job.topology, &worker, job.steps});
            }
            return job;
        } catch (const Error& e) {
            refusals += "\n  " + job.topology_label + ": " + e.what();
        }
    }
    throw std::runtime_error(c.name + " accepts none of the conformance topologies:" + refusals);
}

testing::HarnessOptions harness_options(const Job& job) {
    testing::HarnessOptions o = testing::seconds_clock();
    o.max_steps = job.steps;
    o.topology = job.topology;
    o.seed = job.seed;
    o.step_jitter = 0.5;  // peers out of step: messages arrive at every point of a step
    o.delay = 0.2;
    o.delay_jitter = 0.6;
    o.max_events = 1'000'000;
    return o;
}

testing::Peers peers(const Candidate& c, const Job& job, const json::Node* options) {
    testing::Peers p;
    p.n = job.n;
    p.worker = [job](int r) {
        const auto salt = static_cast<std::uint64_t>(r) + job.seed * 1000;
        return std::make_unique<testing::QuadraticWorker>(
            testing::random_vector(job.dim, 100 + salt), 1.0,
            testing::random_vector(job.dim, 500 + salt), 0.1);
    };
    p.protocol = [make = c.make, options](proto::PeerContext ctx) {
        return make(options, std::move(ctx));
    };
    return p;
}

// Until the protocol interface has a question for it (the registry change of issue 38), the
// rank that stopped a protocol is read from the two protocols that stop on a failure.
std::optional<int> failure_named(const proto::Protocol& p) {
    if (const auto* a = dynamic_cast<const proto::AllreduceProtocol*>(&p)) return a->failed_rank();
    if (const auto* q = dynamic_cast<const proto::Qallreduce*>(&p)) return q->failed_rank();
    return std::nullopt;
}

}  // namespace gossamer::conformance
