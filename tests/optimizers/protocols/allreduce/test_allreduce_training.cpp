#include <doctest/doctest.h>

#include <map>

#include "gossamer/core/models.hpp"
#include "gossamer/core/sharding.hpp"
#include "gossamer/core/synthetic.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "optimizers/harness/harness.hpp"
#include "optimizers/harness/workers.hpp"

using namespace gossamer;
using namespace gossamer::proto;
using gossamer::testing::Harness;
using gossamer::testing::HarnessOptions;
using gossamer::testing::StandInWorker;

namespace {

constexpr int kFeatures = 6;

// n softmax-regression trainers on iid shards of one synthetic set, all initialised from the
// same seed (as drivers do), each drawing its own batches.
struct RingJob {
    Dataset data;
    std::vector<Dataset> shards;

    explicit RingJob(int n) : data(make_logistic_regression(640, kFeatures, 7).data) {
        ShardSpec spec;
        spec.peers = n;
        spec.seed = 3;
        for (int r = 0; r < n; ++r) shards.push_back(shard_for_peer(data, spec, r));
    }

    Harness harness(std::int64_t steps, AllreduceOptions o, bool shuffle) {
        std::vector<std::unique_ptr<LocalWorker>> workers;
        optim::OptimizerConfig sgd;
        sgd.lr = 0.5;
        for (int r = 0; r < static_cast<int>(shards.size()); ++r) {
            auto model = models::softmax_regression(kFeatures, 2);
            auto layout = model->default_partitions();
            workers.push_back(std::make_unique<optim::LocalTrainer>(
                std::move(model), layout, sgd, optim::LrSchedule({}, sgd.lr),
                shards[static_cast<std::size_t>(r)], 16, 11, r));
        }
        HarnessOptions ho;
        ho.check_edge_seq = true;
        ho.max_steps = steps;
        ho.shuffle = shuffle;
        ho.seed = 5;
        ho.log_payloads = false;
        return Harness(
            std::move(workers),
            [o](PeerContext ctx) { return std::make_unique<AllreduceProtocol>(std::move(ctx), o); },
            ho);
    }
};

double full_loss(Harness& h, const Dataset& data, int r) {
    return dynamic_cast<optim::LocalTrainer&>(h.worker(r)).evaluate(data).loss;
}

}  // namespace

TEST_CASE("allreduce SGD with real trainers: the loss falls and every model is identical") {
    const int n = 4;
    RingJob cluster(n);
    Harness h = cluster.harness(60, {}, true);
    const double before = full_loss(h, cluster.data, 0);
    REQUIRE(h.run());
    const double after = full_loss(h, cluster.data, 0);
    CHECK(after < 0.8 * before);
    for (int r = 0; r < n; ++r) {
        CHECK(h.model(r) == h.model(0));
        CHECK(h.worker(r).steps() == 60);
        CHECK(h.protocol(r).stats().messages_sent == std::uint64_t(60 * 2 * (n - 1)));
    }
    // The peers drew different batches: their own losses differ while their models agree.
    CHECK(h.losses(1) != h.losses(2));
}

TEST_CASE("allreduce period H: models agree right after every H-th step and differ between") {
    const int n = 3, period = 4;
    const std::int64_t steps = 10;
    RingJob cluster(n);
    Harness h = cluster.harness(steps, {period, 2}, true);
    // snapshots[step][rank]: the model rank starts step `step` from.
    std::map<std::int64_t, std::map<int, std::vector<float>>> snapshots;
    h.on_step_start = [&](int r, std::int64_t step) { snapshots[step][r] = h.model(r); };
    const double before = full_loss(h, cluster.data, 0);
    REQUIRE(h.run());
    REQUIRE(snapshots.size() == std::size_t(steps));
    for (const auto& [step, models] : snapshots) {
        CAPTURE(step);
        REQUIRE(models.size() == std::size_t(n));
        const bool same = models.at(1) == models.at(0) && models.at(2) == models.at(0);
        CHECK(same == (step % period == 0));  // step 0: the common initial model
    }
    // The last step (10, not a multiple of 4) ends with an average too.
    CHECK(h.model(1) == h.model(0));
    CHECK(h.model(2) == h.model(0));
    CHECK(full_loss(h, cluster.data, 0) < before);
    for (int r = 0; r < n; ++r) {
        CHECK(h.protocol(r).stats().rounds == 3);
        CHECK(h.protocol(r).stats().messages_sent == std::uint64_t(3 * 2 * (n - 1) * 2));
    }
}

TEST_CASE("allreduce period H: the average of the local models, bitwise equal everywhere") {
    const int n = 5, period = 3;
    const std::size_t length = 7;
    std::vector<std::unique_ptr<LocalWorker>> workers;
    for (int r = 0; r < n; ++r)
        workers.push_back(std::make_unique<StandInWorker>(
            std::vector<float>(length, 1.0f),
            [r](std::int64_t, std::span<const float>, std::span<float> g) {
                for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.1f * float(r) + float(i);
            },
            0.125f));
    HarnessOptions ho;
    ho.check_edge_seq = true;
    ho.max_steps = period;
    Harness h(
        std::move(workers),
        [](PeerContext ctx) {
            return std::make_unique<AllreduceProtocol>(std::move(ctx), AllreduceOptions{period});
        },
        ho);
    REQUIRE(h.run());
    for (int r = 0; r < n; ++r) {
        const auto x = h.model(r);
        CHECK(x == h.model(0));
        for (std::size_t i = 0; i < length; ++i) {
            // x_r = 1 - H lr g_r after H local steps; the average uses the mean g.
            double mean_g = 0;
            for (int q = 0; q < n; ++q) mean_g += (0.1 * q + double(i)) / n;
            CHECK(x[i] == doctest::Approx(1.0 - period * 0.125 * mean_g).epsilon(1e-5));
        }
        // Local SGD applies each peer's own gradient, never an averaged one.
        CHECK(dynamic_cast<const StandInWorker&>(h.worker(r)).applied().size() == 3);
    }
}
