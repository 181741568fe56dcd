// The registry's table (registry.hpp): the built-in list and its order, lookups, registering.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/topology/schedule.hpp"
#include "support/errors.hpp"

using namespace gossamer;
using gossamer::test::config_error;

namespace {

// The built-in algorithms (algorithm_list.hpp); the cases below register more after them.
const std::vector<std::string> kBuiltIn = {"allreduce", "dpsgd", "sgp",   "async",
                                           "choco",     "lsgd",  "gadmm", "qallreduce"};

std::shared_ptr<const topology::Schedule> ring(int n) {
    topology::FamilySpec f;
    f.family = "ring";
    f.n = n;
    f.weights = topology::WeightRule::uniform;
    return topology::generate(f);
}

proto::Algorithm entry(std::string name) {
    proto::Algorithm a;
    a.name = std::move(name);
    a.summary = "a test entry";
    a.make = proto::algorithm("dpsgd").make;
    return a;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("the built-in algorithms are listed in the registry's order, protocol_names() from it") {
    const auto names = proto::protocol_names();
    REQUIRE(names.size() >= kBuiltIn.size());
    CHECK(std::vector<std::string>(names.begin(), names.begin() + 8) == kBuiltIn);
    REQUIRE(proto::algorithms().size() == names.size());
    for (std::size_t i = 0; i < names.size(); ++i) CHECK(proto::algorithms()[i].name == names[i]);
}

TEST_CASE("every built-in entry builds a protocol of its own name and has a one-line summary") {
    // Protocol::elastic_refusal() finds its entry by name(): the two must agree.
    const auto topology = ring(4);
    for (const auto& name : kBuiltIn) {
        const auto& a = proto::algorithm(name);
        CAPTURE(a.name);
        CHECK(!a.summary.empty());
        CHECK(a.summary.find('\n') == std::string::npos);
        CHECK(&proto::algorithm(a.name) == &a);
        proto::CostOnlyWorker worker(16);
        const auto p =
            proto::make_protocol(a.name, nullptr, proto::PeerContext{0, 4, topology, &worker, 3});
        REQUIRE(p);
        CHECK(p->name() == a.name);
    }
}

TEST_CASE("an unknown algorithm is one ConfigError line naming every known one") {
    const std::string e = config_error([] { proto::algorithm("gosip"); });
    CHECK(e.find("unknown algorithm \"gosip\"") != std::string::npos);
    CHECK(e.find("use one of allreduce, dpsgd, sgp, async, choco, lsgd, gadmm, qallreduce") !=
          std::string::npos);
    CHECK(proto::find_algorithm("gosip") == nullptr);
    proto::CostOnlyWorker worker(4);
    CHECK(config_error([&] {
              proto::make_protocol("gosip", nullptr, proto::PeerContext{0, 4, ring(4), &worker, 1});
          }) == e);
}

TEST_CASE("the commands' defaults come from the entries") {
    CHECK(proto::default_algorithm() == "dpsgd");
    CHECK(proto::default_algorithms(proto::default_for_sim) == "allreduce,dpsgd,sgp");
    CHECK(proto::default_algorithms(proto::default_for_launch) == "allreduce,dpsgd,async");
}

TEST_CASE("register_algorithm refuses a duplicate, a bad name, no factory and a second default") {
    CHECK(error_of([] { proto::register_algorithm(entry("dpsgd")); }) ==
          "register_algorithm: algorithm dpsgd is registered already");
    CHECK(error_of([] { proto::register_algorithm(entry("")); }) ==
          "register_algorithm: an algorithm needs a name");
    CHECK(error_of([] { proto::register_algorithm(entry("My-Algo")); }) ==
          "register_algorithm: algorithm name \"My-Algo\" has characters other than a-z, 0-9 "
          "and _");
    auto no_factory = entry("no_factory");
    no_factory.make = nullptr;
    CHECK(error_of([&] { proto::register_algorithm(no_factory); }) ==
          "register_algorithm: algorithm no_factory has no factory");
    auto second = entry("second_default");
    second.defaults = proto::default_for_peer;
    CHECK(error_of([&] { proto::register_algorithm(second); }) ==
          "register_algorithm: algorithm dpsgd and second_default are both the default for "
          "gossamer peer");
    const auto before = proto::protocol_names();
    CHECK(std::find(before.begin(), before.end(), "second_default") == before.end());
}

TEST_CASE("a registered algorithm comes after the others and make_protocol builds it") {
    const std::size_t before = proto::algorithms().size();
    auto a = entry("registry_test_dpsgd");
    a.defaults = proto::default_for_sim;
    proto::register_algorithm(a);
    REQUIRE(proto::algorithms().size() == before + 1);
    CHECK(proto::protocol_names().back() == "registry_test_dpsgd");
    CHECK(proto::default_algorithms(proto::default_for_sim) ==
          "allreduce,dpsgd,sgp,registry_test_dpsgd");
    proto::CostOnlyWorker worker(8);
    const auto p = proto::make_protocol("registry_test_dpsgd", nullptr,
                                        proto::PeerContext{1, 4, ring(4), &worker, 2});
    CHECK(p->name() == "dpsgd");  // the factory it was given
    // The unknown-name line names it too.
    CHECK(config_error([] { proto::algorithm("nope"); }).find(", registry_test_dpsgd") !=
          std::string::npos);
}
