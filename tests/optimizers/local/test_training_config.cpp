// The training config's sections for several peers: sharding and per-algorithm options.
#include <doctest/doctest.h>

#include <string>

#include "gossamer/optimizers/local/training_config.hpp"
#include "support/errors.hpp"

using gossamer::test::config_error;
namespace optim = gossamer::optim;

namespace {

const std::string kBase = R"("data": {"name": "logreg_synthetic", "samples": 100, "features": 3},
    "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.1})";

optim::TrainingConfig parse(const std::string& extra) {
    return optim::parse_training_config(gossamer::json::parse_text(
        "{" + kBase + (extra.empty() ? "" : ", " + extra) + "}", "t.json"));
}

}  // namespace

TEST_CASE("sharding and algorithm options are read") {
    auto c = parse(R"("seed": 7, "sharding": {"mode": "dirichlet", "alpha": 0.3},
                      "algorithms": {"sgp": {"staleness": 2}})");
    CHECK(c.sharding.mode == gossamer::ShardMode::dirichlet);
    CHECK(c.sharding.alpha == 0.3);
    CHECK(c.sharding.seed == 7);
    auto sgp = c.algorithm_options("sgp");
    REQUIRE(sgp.has_value());
    CHECK(sgp->at("staleness").as_int() == 2);
    CHECK_FALSE(c.algorithm_options("dpsgd").has_value());
    auto d = parse(R"("sharding": {"sizes": [1, 2, 3]})");
    CHECK(d.sharding.mode == gossamer::ShardMode::iid);
    CHECK(d.sharding.sizes.size() == 3);
    CHECK_FALSE(parse("").algorithm_options("sgp").has_value());
}

TEST_CASE("bad sharding and algorithm sections name their JSON path") {
    CHECK(config_error([] {
              parse(R"("sharding": {"mode": "skewed"})");
          }).rfind("t.json: sharding.mode: unknown value \"skewed\"", 0) == 0);
    CHECK(config_error([] {
              parse(R"("sharding": {"alpha": 0})");
          }).rfind("t.json: sharding.alpha: alpha must be > 0", 0) == 0);
    CHECK(config_error([] {
              parse(R"("sharding": {"sizes": [1, -2]})");
          }).rfind("t.json: sharding.sizes[1]: a relative shard size must be > 0", 0) == 0);
    CHECK(config_error([] {
              parse(R"("sharding": {"peers": 4})");
          }).rfind("t.json: sharding.peers: unknown key \"peers\"", 0) == 0);
    CHECK(config_error([] {
              parse(R"("algorithms": [1])");
          }).rfind("t.json: algorithms: expected an object", 0) == 0);
    CHECK(config_error([] {
              parse(R"("algorithms": {"sgp": 3})");
          }).rfind("t.json: algorithms.sgp: expected an object of options", 0) == 0);
}

TEST_CASE("a cosine warm-up as long as the run blames warmup_steps, the key the user wrote") {
    // total_steps is filled in from the run: it must not be named.
    const std::string cosine =
        R"("schedule": {"schedule": "cosine", "warmup_steps": 1000000000000000})";
    CHECK(config_error([&] { parse(cosine); }) ==
          "t.json: schedule.warmup_steps: warmup_steps 1000000000000000 is longer than any run "
          "(2147483647 steps at most); lower warmup_steps, or give total_steps");
    const auto c = parse(R"("schedule": {"schedule": "cosine", "warmup_steps": 500})");
    CHECK(config_error([&] { (void)optim::build_schedule(c, 300); }) ==
          "t.json: schedule.warmup_steps: warmup_steps 500 is not below the run's 300 steps (a "
          "cosine schedule without total_steps spans the whole run); lower warmup_steps, or give "
          "total_steps");
    CHECK(optim::build_schedule(c, 1000).at(999) >= 0);
    // Given total_steps, the comparison names total_steps as before (the user wrote both).
    CHECK(config_error([] {
              parse(R"("schedule": {"schedule": "cosine", "warmup_steps": 50, "total_steps": 40})");
          }).rfind("t.json: schedule.total_steps: total_steps 40 must exceed warmup_steps 50", 0) ==
          0);
}

TEST_CASE("guard.value_bound is read, off by default, and a factor below 1 is refused") {
    CHECK(parse("").value_bound == 0);
    CHECK(parse(R"("guard": {"value_bound": 1000})").value_bound == 1000);
    CHECK(parse(R"("guard": {"value_bound": 0})").value_bound == 0);
    CHECK(config_error([] { parse(R"("guard": {"value_bound": 0.5})"); })
              .rfind("t.json: guard.value_bound: value_bound 0.5 would refuse a neighbour's "
                     "values smaller than this peer's own; use 0 (off) or a factor of at least 1",
                     0) == 0);
    CHECK(config_error([] {
              parse(R"("guard": {"bound": 3})");
          }).rfind("t.json: guard.bound: unknown key \"bound\"", 0) == 0);
}
