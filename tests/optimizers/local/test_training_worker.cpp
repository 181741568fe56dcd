// optim::make_training_worker, the one function both drivers build a peer's training worker with
// (`gossamer sim`'s virtual peers and real peers): its shard, steps and trainer, the same for
// every call, and the order of its checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "support/errors.hpp"

using gossamer::test::config_error;
namespace optim = gossamer::optim;

namespace {

// An MLP 3-4-2 (layers fc1, fc2) on 100 samples, batches of 5.
optim::TrainingConfig config(const std::string& extra = "") {
    return optim::parse_training_config(gossamer::json::parse_text(
        R"({"data": {"name": "logreg_synthetic", "samples": 100, "features": 3},
            "model": {"name": "mlp", "hidden": [4]}, "optimizer": {"name": "sgd", "lr": 0.1},
            "training": {"batch_size": 5}, "seed": 3)" +
            (extra.empty() ? "" : ", " + extra) + "}",
        "t.json"));
}

// Two local steps from the trainer's own start; the parameters after them.
std::vector<float> two_steps(optim::LocalTrainer& t) {
    for (int i = 0; i < 2; ++i) {
        t.compute_gradient(t.params());
        t.apply_gradient(t.params(), t.gradient());
    }
    return {t.params().begin(), t.params().end()};
}

}  // namespace

TEST_CASE("make_training_worker: a peer's shard, steps and trainer, the same for every call") {
    const auto c = config();
    const auto data = optim::load_training_data(c);
    auto a = optim::make_training_worker(c, data.train, 1, 4, 2);
    REQUIRE(a.shard);
    REQUIRE(a.trainer);
    CHECK(a.shard->size() == 25);  // iid: a quarter of the samples
    CHECK(a.steps == 25 / 5 * 2);
    auto b = optim::make_training_worker(c, data.train, 1, 4, 2);
    CHECK(two_steps(*a.trainer) == two_steps(*b.trainer));  // same initial values, same batches
    auto other = optim::make_training_worker(c, data.train, 2, 4, 2);
    CHECK(other.shard->x != a.shard->x);
    CHECK(two_steps(*other.trainer) != two_steps(*b.trainer));
}

TEST_CASE("make_training_worker: a batch larger than the shard is one ConfigError") {
    const auto c = config();
    const auto data = optim::load_training_data(c);
    const std::string e =
        config_error([&] { optim::make_training_worker(c, data.train, 0, 40, 1); });
    CHECK(e.rfind("t.json: training.batch_size:", 0) == 0);
}

TEST_CASE(
    "make_training_worker: with an algorithm, its multirate check comes before the "
    "schedule's") {
    // Per-partition gossip (not for sgp) and a warm-up as long as the 5-step run: both wrong.
    const auto c = config(R"("partitions": {"fast": ["fc2"], "slow": ["*"]},
        "multirate": {"partitions": {"slow": {"period": 4}}},
        "schedule": {"schedule": "cosine", "warmup_steps": 5})");
    const auto data = optim::load_training_data(c);
    // The rates checked against an algorithm, as the simulator does.
    const auto against = [](const char* algorithm) {
        return [algorithm](const optim::Multirate& m) {
            gossamer::proto::check_multirate_algorithm(m, algorithm);
        };
    };
    const std::string e =
        config_error([&] { optim::make_training_worker(c, data.train, 0, 4, 1, against("sgp")); });
    CHECK(e.rfind("t.json: multirate.partitions.slow: sgp gossips the whole model", 0) == 0);
    const std::string without =
        config_error([&] { optim::make_training_worker(c, data.train, 0, 4, 1); });
    CHECK(without.rfind("t.json: schedule.warmup_steps:", 0) == 0);
    const std::string dpsgd = config_error(
        [&] { optim::make_training_worker(c, data.train, 0, 4, 1, against("dpsgd")); });
    CHECK(dpsgd == without);
}

TEST_CASE(
    "make_training_worker: equal shards that differ by one sample give every peer the same "
    "steps") {
    // 100 samples over 3 peers: shards of 33, 33 and 34; batches of 2 would be 16, 16 and 17
    // steps, and a synchronous protocol's last round would wait for peers that have stopped.
    auto batch2 = [](const std::string& extra) {
        return optim::parse_training_config(gossamer::json::parse_text(
            R"({"data": {"name": "logreg_synthetic", "samples": 100, "features": 3},
                "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.1},
                "training": {"batch_size": 2})" +
                extra + "}",
            "t.json"));
    };
    const auto c = batch2("");
    const auto data = optim::load_training_data(c);
    std::vector<std::int64_t> sizes, steps;
    for (int r = 0; r < 3; ++r) {
        auto w = optim::make_training_worker(c, data.train, r, 3, 2);
        sizes.push_back(w.shard->size());
        steps.push_back(w.steps);
    }
    CHECK(*std::max_element(sizes.begin(), sizes.end()) == 34);
    CHECK(steps == std::vector<std::int64_t>{32, 32, 32});
    // Relative sizes are uneven data by choice: each peer keeps its own shard's steps.
    const auto sized = batch2(R"(, "sharding": {"sizes": [1, 1, 2]})");
    CHECK(optim::make_training_worker(sized, data.train, 2, 3, 1).steps == 25);
    CHECK(optim::make_training_worker(sized, data.train, 0, 3, 1).steps == 12);
}
