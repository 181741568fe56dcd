// The questions drivers ask of the registry by name (questions.hpp): each entry's answer is what
// the drivers computed by name before the registry held it, and a name the registry lacks gets
// the default answer.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/topology/schedule.hpp"
#include "support/errors.hpp"

using namespace gossamer;
using gossamer::test::config_error;

namespace {

std::shared_ptr<const topology::Schedule> ring(int n) {
    topology::FamilySpec f;
    f.family = "ring";
    f.n = n;
    f.weights = topology::WeightRule::uniform;
    return topology::generate(f);
}

// Options of algorithm `name` as a training config holds them.
json::Node options(const std::string& name, const std::string& text) {
    const auto doc =
        json::parse_text("{\"algorithms\": {\"" + name + "\": " + text + "}}", "train.json");
    return json::Node(doc).at("algorithms").at(name);
}

}  // namespace

TEST_CASE("join_names writes lists of names as sentences") {
    CHECK(proto::join_names({}, "and").empty());
    CHECK(proto::join_names({"a"}, "and") == "a");
    CHECK(proto::join_names({"a", "b"}, "and") == "a and b");
    CHECK(proto::join_names({"a", "b"}, "or", true) == "a or b");
    CHECK(proto::join_names({"a", "b", "c"}, "and") == "a, b and c");
    CHECK(proto::join_names({"a", "b", "c"}, "or", true) == "a, b, or c");
}

TEST_CASE("elastic jobs: the refusal by name and the lists of those that can, from the entries") {
    for (const char* name : {"async", "dpsgd", "allreduce"})
        CHECK(proto::elastic_refusal(name).empty());
    CHECK(proto::elastic_refusal("sgp") ==
          "algorithm sgp cannot join, leave or rejoin a running job yet (async, dpsgd and "
          "allreduce with \"elastic\" can: docs/operations/elastic.md)");
    // A protocol outside the registry cannot (Protocol::elastic_refusal's default).
    CHECK(proto::elastic_refusal("outside").starts_with("algorithm outside cannot join"));
    CHECK(proto::elastic_algorithms(true, true) ==
          std::vector<std::string>{"async", "dpsgd", "allreduce with \"elastic\""});
    CHECK(proto::elastic_algorithms(true, false) ==
          std::vector<std::string>{"async", "dpsgd", "allreduce"});
    CHECK(proto::elastic_algorithms(false, false) == std::vector<std::string>{"async", "dpsgd"});
    CHECK(proto::elastic_choice() == "async");
}

TEST_CASE("check_churn asks dpsgd's entry, with the option's path and the cluster in the line") {
    proto::JobSetup s;
    s.config_file = "train.json";
    s.cluster = "churn.json";
    const auto delay = options("dpsgd", R"({"delay": 1})");
    s.options = &delay;
    CHECK(config_error([&] { proto::check_churn("dpsgd", s); }) ==
          "train.json: algorithms.dpsgd.delay: algorithm dpsgd with delay cannot join, leave or "
          "rejoin a running job yet, and the cluster churn.json has churn; drop \"delay\", or "
          "the cluster's join_at, leave_at and rejoin_at (docs/operations/elastic.md)");
    s.options = nullptr;
    s.multirate = true;
    CHECK(config_error([&] { proto::check_churn("dpsgd", s); }) ==
          "train.json: multirate: algorithm dpsgd with multirate partitions cannot join, leave or "
          "rejoin a running job yet, and the cluster churn.json has churn; drop \"multirate\", "
          "or the cluster's join_at, leave_at and rejoin_at (docs/operations/elastic.md)");
    // Entries without the question, and names outside the registry, refuse nothing here.
    proto::check_churn("async", s);
    proto::check_churn("outside", s);
}

TEST_CASE("multirate: the algorithms that gossip per partition come from the entries") {
    CHECK(proto::per_partition_algorithms() == std::vector<std::string>{"dpsgd", "choco"});
}

TEST_CASE("wait_per_step: each entry's least wait for messages per step") {
    const auto topology = ring(4);
    proto::JobSetup s;
    s.topology = topology.get();
    const double latency = 0.01;
    CHECK(proto::wait_per_step("allreduce", s, latency) == doctest::Approx(2 * 3 * latency));
    CHECK(proto::wait_per_step("dpsgd", s, latency) == doctest::Approx(latency));
    CHECK(proto::wait_per_step("choco", s, latency) == doctest::Approx(latency));
    CHECK(proto::wait_per_step("sgp", s, latency) == doctest::Approx(latency / 2));
    for (const char* name : {"async", "lsgd", "gadmm", "qallreduce", "outside"})
        CHECK(proto::wait_per_step(name, s, latency) == 0);
    // Options other than the defaults may relax it: no floor then, except sgp's staleness.
    const auto period = options("allreduce", R"({"period": 2})");
    s.options = &period;
    CHECK(proto::wait_per_step("allreduce", s, latency) == 0);
    const auto empty = options("dpsgd", "{}");
    s.options = &empty;
    CHECK(proto::wait_per_step("dpsgd", s, latency) == doctest::Approx(latency));
    const auto staleness = options("sgp", R"({"staleness": 3})");
    s.options = &staleness;
    CHECK(proto::wait_per_step("sgp", s, latency) == doctest::Approx(latency / 4));
}

TEST_CASE("model_copies and resync_timeout: the entries' answers and the defaults") {
    const auto topology = ring(4);  // in-degree 2
    proto::JobSetup s;
    s.topology = topology.get();
    CHECK(proto::max_in_degree(*topology) == 2);
    CHECK(proto::model_copies("allreduce", s) == 3);
    for (const char* name : {"dpsgd", "sgp", "async", "choco", "outside"})
        CHECK(proto::model_copies(name, s) == 7);
    CHECK(proto::resync_timeout("dpsgd", nullptr) == 5.0);
    CHECK(proto::resync_timeout("choco", nullptr) == 5.0);
    const auto set = options("choco", R"({"resync_timeout": 2.5})");
    CHECK(proto::resync_timeout("choco", &set) == 2.5);
    for (const char* name : {"allreduce", "sgp", "async", "lsgd", "outside"})
        CHECK_FALSE(proto::resync_timeout(name, nullptr).has_value());
}
