// Whole-job resume on the library path (docs/operations/checkpoint.md): real-time peers as threads
// over the in-process transport take consistent-cut snapshots; a job restored from the snapshots of
// step k ends with the same models, bit for bit, as the run that went on (dpsgd, allreduce), and
// the push-sum protocols (sgp, async) quiesce so that the masses saved at a cut add up to n.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "peers.hpp"

using namespace peer_test;

namespace {

optim::TrainingConfig config(const char* optimizer) {
    return optim::parse_training_config(json::parse_text(std::string(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 200, "features": 10, "seed": 5},
        "model": {"name": "softmax"}, "optimizer": )") + optimizer +
                                                             R"(,
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 2, "batch_size": 25}})",
                                                         "resume.json"));
}

// One job: every peer's worker and protocol, and the snapshots each peer took, by step.
struct Job {
    std::vector<optim::TrainingWorker> workers;
    std::vector<std::unique_ptr<proto::Protocol>> protocols;
    std::vector<std::map<std::int64_t, std::vector<char>>> snapshots;
    std::vector<Outcome> outcomes;
};

std::unique_ptr<Job> make_job(const std::string& algorithm, const char* options,
                              const optim::TrainingConfig& cfg, const optim::TrainingData& data,
                              int n, std::int64_t every) {
    auto job = std::make_unique<Job>();
    const auto topo = family(algorithm == "sgp" ? "one_peer_exponential" : "exponential", n,
                             topology::WeightRule::uniform);
    std::optional<json::Document> doc;
    std::optional<json::Node> opts;
    if (options) {
        doc = json::parse_text(options, "options");
        opts.emplace(*doc);
    }
    for (int r = 0; r < n; ++r) {
        job->workers.push_back(optim::make_training_worker(cfg, data.train, r, n, cfg.epochs));
        auto& w = job->workers.back();
        proto::PeerContext ctx{r, n, topo, w.trainer.get(), w.steps};
        job->protocols.push_back(proto::make_protocol(algorithm, opts ? &*opts : nullptr, ctx));
        job->protocols.back()->enable_checkpoints(every);
    }
    job->snapshots.resize(static_cast<std::size_t>(n));
    return job;
}

void run(Job& job) {
    std::vector<proto::Protocol*> ps;
    std::vector<proto::LocalWorker*> ws;
    for (std::size_t r = 0; r < job.protocols.size(); ++r) {
        ps.push_back(job.protocols[r].get());
        ws.push_back(job.workers[r].trainer.get());
    }
    job.outcomes = run_peers(ps, ws, [&](int r) {
        peer::DriverOptions o;
        o.run_timeout = peer::Millis(60'000);
        // Each rank writes only its own map, on its own thread.
        o.on_snapshot = [&job, r](proto::Snapshot&& s) {
            job.snapshots[static_cast<std::size_t>(r)][s.step] = std::move(s.state);
        };
        return o;
    });
    for (const auto& o : job.outcomes) {
        REQUIRE(o.error == "");
        REQUIRE(o.result);
    }
}

void restore(Job& job, const Job& from, std::int64_t step) {
    for (std::size_t r = 0; r < job.protocols.size(); ++r) {
        const auto& state = from.snapshots[r].at(step);
        job.protocols[r]->restore("rank " + std::to_string(r),
                                  std::string_view(state.data(), state.size()));
    }
}

std::vector<std::vector<float>> models(const Job& job) {
    std::vector<std::vector<float>> out;
    for (const auto& p : job.protocols) {
        out.emplace_back(job.workers.front().trainer->size());
        p->current_model(out.back());
    }
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double total_mass(const Job& job) {
    double sum = 0;
    for (const auto& p : job.protocols) sum += p->mass();
    return sum;
}

}  // namespace

TEST_CASE(
    "dpsgd and allreduce restored at step k end with the unbroken run's models, bit for bit") {
    struct Case {
        const char* algorithm;
        const char* options;
        const char* optimizer;
    };
    for (const Case c :
         {Case{"dpsgd", nullptr, R"({"name": "sgd", "lr": 0.2, "momentum": 0.9})"},
          Case{"dpsgd", R"({"mode": "cta"})", R"({"name": "adam", "lr": 0.01})"},
          Case{"allreduce", nullptr, R"({"name": "adam", "lr": 0.01})"},
          Case{"allreduce", R"({"period": 3})",
               R"({"name": "sgd", "lr": 0.2, "momentum": 0.9, "nesterov": true})"}}) {
        CAPTURE(c.algorithm);
        CAPTURE(c.options ? c.options : "");
        const auto cfg = config(c.optimizer);
        const auto data = optim::load_training_data(cfg);
        const int n = 4;
        auto unbroken = make_job(c.algorithm, c.options, cfg, data, n, 8);
        run(*unbroken);
        const std::int64_t steps = unbroken->workers[0].steps;  // 1600 / 4 / 25 * 2 = 32
        REQUIRE(steps == 32);
        for (const auto& per_rank : unbroken->snapshots) {
            REQUIRE(per_rank.size() == 3);  // steps 8, 16, 24 (never the last)
            CHECK(per_rank.count(16) == 1);
        }
        const auto want = models(*unbroken);

        // Stopped after step 16 (everything after it is gone), resumed from its checkpoint.
        auto resumed = make_job(c.algorithm, c.options, cfg, data, n, 8);
        restore(*resumed, *unbroken, 16);
        run(*resumed);
        const auto got = models(*resumed);
        for (int r = 0; r < n; ++r) {
            CAPTURE(r);
            CHECK(resumed->outcomes[static_cast<std::size_t>(r)].result->steps == steps - 16);
            CHECK(same_bits(got[static_cast<std::size_t>(r)], want[static_cast<std::size_t>(r)]));
            // The later cut is the same state, byte for byte: replicas, counters, optimizer.
            CHECK(resumed->snapshots[static_cast<std::size_t>(r)].at(24) ==
                  unbroken->snapshots[static_cast<std::size_t>(r)].at(24));
            CHECK(resumed->snapshots[static_cast<std::size_t>(r)].count(16) == 0);
        }
    }
}

TEST_CASE("sgp and async quiesce at each checkpoint step: the saved masses add up to n") {
    const auto cfg = config(R"({"name": "sgd", "lr": 0.2})");
    const auto data = optim::load_training_data(cfg);
    const int n = 4;
    for (const char* options : {R"({})", R"({"outbox": true})"}) {
        for (const std::string algorithm : {"sgp", "async"}) {
            CAPTURE(algorithm);
            CAPTURE(options);
            auto unbroken = make_job(algorithm, options, cfg, data, n, 8);
            run(*unbroken);
            CHECK(total_mass(*unbroken) == doctest::Approx(n).epsilon(1e-12));
            for (const std::int64_t step : {8, 16, 24}) {
                CAPTURE(step);
                // The masses of a cut: n, as with nothing in flight.
                auto resumed = make_job(algorithm, options, cfg, data, n, 8);
                restore(*resumed, *unbroken, step);
                CHECK(total_mass(*resumed) == doctest::Approx(n).epsilon(1e-12));
                if (step != 16) continue;
                const double at_cut = total_mass(*resumed);
                run(*resumed);
                for (const auto& o : resumed->outcomes) CHECK(o.result->steps == 32 - step);
                // Resumed, the job ends with the mass it was cut with: nothing lost or doubled.
                CHECK(total_mass(*resumed) == doctest::Approx(at_cut).epsilon(1e-12));
                CHECK(total_mass(*resumed) == doctest::Approx(n).epsilon(1e-12));
            }
        }
    }
}

TEST_CASE(
    "async: a peer that enters a job taking checkpoints takes part in its cuts once admitted, and "
    "a cut every rank holds is exact") {
    // Rank 3 is absent when the others start (as after --min-peers 3) and enters at once; its
    // neighbours neither wait for it nor count it at a cut until it is admitted and the edges
    // agreed their first cut (docs/operations/elastic.md, "Checkpoints in an elastic job").
    const auto cfg = config(R"({"name": "sgd", "lr": 0.2})");
    const auto data = optim::load_training_data(cfg);
    const int n = 4;
    for (const char* options : {R"({})", R"({"outbox": true})"}) {
        CAPTURE(options);
        auto joined = make_job("async", options, cfg, data, n, 8);
        std::vector<proto::Protocol*> ps;
        std::vector<proto::LocalWorker*> ws;
        for (int r = 0; r < n; ++r) {
            ps.push_back(joined->protocols[static_cast<std::size_t>(r)].get());
            ws.push_back(joined->workers[static_cast<std::size_t>(r)].trainer.get());
        }
        joined->outcomes = run_peers(ps, ws, [&](int r) {
            peer::DriverOptions o;
            o.run_timeout = peer::Millis(60'000);
            o.declared_step_time = [](std::int64_t, double) { return 0.002; };
            if (r == 3)
                o.enter = proto::Entry::fresh;
            else
                o.absent = {3};
            o.on_snapshot = [&job = *joined, r](proto::Snapshot&& s) {
                job.snapshots[static_cast<std::size_t>(r)][s.step] = std::move(s.state);
            };
            return o;
        });
        for (const auto& o : joined->outcomes) {
            REQUIRE(o.error == "");
            REQUIRE(o.result);
        }
        // Three peers started with w = 1; the joiner took half of its sponsor's.
        CHECK(total_mass(*joined) == doctest::Approx(3).epsilon(1e-12));
        std::int64_t common = -1;
        for (const std::int64_t step : {24, 16, 8})
            if (common < 0 && joined->snapshots[3].count(step) == 1) common = step;
        REQUIRE(common > 0);  // the joiner wrote a cut of its own
        MESSAGE("options " << std::string(options) << ": the joiner's first written cut: step "
                           << joined->snapshots[3].begin()->first);
        for (int r = 0; r < 3; ++r)
            REQUIRE(joined->snapshots[static_cast<std::size_t>(r)].count(common) == 1);
        // The masses of a cut all four took part in add up to the job's, nothing in flight, and
        // the job resumed from it ends with that mass.
        auto resumed = make_job("async", options, cfg, data, n, 8);
        restore(*resumed, *joined, common);
        CHECK(total_mass(*resumed) == doctest::Approx(3).epsilon(1e-12));
        run(*resumed);
        CHECK(total_mass(*resumed) == doctest::Approx(3).epsilon(1e-12));
    }
}

TEST_CASE("protocols that cannot resume, and states that do not fit, are refused with one line") {
    const auto cfg = config(R"({"name": "sgd", "lr": 0.2})");
    const auto data = optim::load_training_data(cfg);
    const auto refused = [&](const char* algorithm, const char* options) {
        try {
            make_job(algorithm, options, cfg, data, 4, 8);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(refused("choco", nullptr).find("algorithm choco cannot checkpoint and resume") !=
          std::string::npos);
    CHECK(refused("dpsgd", R"({"delay": 1})").find("delay 1") != std::string::npos);
    CHECK(refused("dpsgd", R"({"reweight": {}})").find("reweight") != std::string::npos);

    auto source = make_job("dpsgd", nullptr, cfg, data, 4, 8);
    run(*source);
    const auto& good = source->snapshots[1].at(8);
    auto fits = [&](const char* algorithm, std::string_view state, int rank = 1) {
        auto job = make_job(algorithm, nullptr, cfg, data, 4, 8);
        try {
            job->protocols[static_cast<std::size_t>(rank)]->restore("ckpt", state);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(fits("dpsgd", std::string_view(good.data(), good.size())) == "");
    // Truncated anywhere: one line naming the file, never a crash.
    for (std::size_t cut : {std::size_t{0}, std::size_t{7}, good.size() / 2, good.size() - 1}) {
        CAPTURE(cut);
        CHECK(fits("dpsgd", std::string_view(good.data(), cut)).find("ckpt") == 0);
    }
    // Another algorithm's state.
    CHECK(fits("allreduce", std::string_view(good.data(), good.size()))
              .find("section 'dpsgd' where 'allreduce' belongs") != std::string::npos);
    CHECK(fits("sgp", std::string_view(good.data(), good.size())).find("ckpt") == 0);
}
