// (b) `gossamer sim` equals inproc peers (sim_peers.hpp): the same training job through the
// simulator (virtual time, one thread) and through real-time peers (the peer driver, one thread
// each, unequal step times), compared by the exact average's final loss.
#include "optimizers/conformance/sim_peers.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <exception>

#include "gossamer/core/cluster.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/simulation.hpp"

namespace gossamer::conformance {

namespace {

optim::TrainingConfig logreg_config() {
    return optim::parse_training_config(json::parse_text(
        R"({"seed": 2, "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
            "data": {"name": "logreg_synthetic", "samples": 800, "test_samples": 200,
                     "features": 10, "seed": 4},
            "training": {"epochs": 2, "batch_size": 25}})",
        "conformance.json"));
}

struct Ends {
    double loss = 0, first = 0, mass = 0;
    std::vector<std::int64_t> steps;  // by rank
};

Ends simulated(const std::string& name, const Job& job, const optim::TrainingConfig& cfg,
               const optim::TrainingData& data) {
    // Jitter puts the peers out of step, so messages arrive at every point of a step.
    auto cluster = homogeneous_cluster(job.n, 0.01, 2e-3, 1e7);
    for (auto& p : cluster.peers) p.jitter = {JitterKind::uniform, 0, 0.9};
    sim::SimSetup s;
    s.algorithm = name;
    s.topology = job.topology;
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 1.0;
    const auto r = sim::simulate(s);
    Ends e{r.evals.back().loss, r.evals.front().loss, r.mass, {}};
    for (const auto& p : r.peers) e.steps.push_back(p.steps);
    return e;
}

Ends real(const std::string& name, const Job& job, const optim::TrainingConfig& cfg,
          const optim::TrainingData& data) {
    peer::LocalTraining t;
    t.algorithm = name;
    t.topology = job.topology;
    t.config = &cfg;
    t.train = &data.train;
    t.test = &data.test;
    t.epochs = cfg.epochs;
    t.options = [](int r) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(60'000);
        // Unequal real step times: the real order of events differs from the simulator's.
        const double pad = 0.0005 * (r + 1);
        o.declared_step_time = [pad](std::int64_t, double) { return pad; };
        return o;
    };
    const auto res = peer::run_local_training(t);
    Ends e;
    for (const auto& o : res.peers) {
        if (!o.error.empty()) throw std::runtime_error("an inproc peer threw: " + o.error);
        e.steps.push_back(o.result ? o.result->steps : -1);
    }
    if (!res.loss) throw std::runtime_error("no inproc peer survived");
    e.loss = *res.loss;
    return e;
}

}  // namespace

Report sim_equals_inproc(const Candidate& c, bool bit_for_bit) {
    Report rep;
    try {
        const Job job = job_for(c, 4);
        const auto cfg = logreg_config();
        const auto data = optim::load_training_data(cfg);
        const Ends s = simulated(c.name, job, cfg, data), p = real(c.name, job, cfg, data);
        if (s.steps != p.steps)
            rep.findings.push_back("the simulator's peers and the inproc peers took other steps");
        if (!std::isfinite(s.loss) || !(s.loss < 0.95 * s.first))
            rep.findings.push_back(
                fmt::format("the simulated job does not train: loss {} from {}", s.loss, s.first));
        if (bit_for_bit) {
            if (std::memcmp(&s.loss, &p.loss, sizeof(double)) != 0)
                rep.findings.push_back(fmt::format(
                    "sim ends with loss {:.17g}, inproc peers with {:.17g}", s.loss, p.loss));
            rep.note = fmt::format("the same final loss, bit for bit ({})", job.topology_label);
        } else {
            if (!std::isfinite(p.loss) || !(p.loss < 0.95 * s.first))
                rep.findings.push_back(
                    fmt::format("the inproc job does not train: loss {}", p.loss));
            if (std::abs(s.mass - job.n) > 1e-9)
                rep.findings.push_back(fmt::format("sim ends with mass {} of {}", s.mass, job.n));
            rep.note =
                "the order of shares follows thread timing: compared the steps, the mass "
                "and that both train";
        }
    } catch (const std::exception& e) {
        rep.findings.push_back(e.what());
    }
    return rep;
}

}  // namespace gossamer::conformance
