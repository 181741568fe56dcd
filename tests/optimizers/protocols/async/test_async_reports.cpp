// When async sends its rate reports: every in-neighbour at once every report_every steps where
// the in-degree is small, round robin every ceil(in-degree / targets) steps where it is large
// (docs/algorithms/async.md, "Rates, measured from timestamps").
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <vector>

#include "gossamer/optimizers/protocols/async/async_gossip.hpp"
#include "gossamer/topology/generators.hpp"

namespace proto = gossamer::proto;
namespace topo = gossamer::topology;

namespace {

struct ReportLog {
    std::map<int, std::vector<std::int64_t>> steps_by_receiver;  // receiver -> steps it heard
    std::vector<int> per_step;                                   // reports sent at each step
};

// Runs peer `rank` alone for `steps` steps and records the rate reports it sends.
ReportLog reports_of(const char* family, int n, int rank, std::int64_t steps,
                     proto::AsyncOptions options, std::int64_t* period = nullptr) {
    topo::FamilySpec f;
    f.family = family;
    f.n = n;
    f.weights = topo::WeightRule::push_sum;
    auto schedule = topo::generate(f);
    proto::CostOnlyWorker worker(4);
    proto::AsyncGossip p(proto::PeerContext{rank, n, schedule, &worker, steps}, options);
    if (period) *period = p.report_period();
    ReportLog log;
    proto::Actions a;
    p.start(0.0, a);
    for (std::int64_t t = 1; t <= steps; ++t) {
        a = {};
        p.step_finished(0.01 * static_cast<double>(t), 0.0, a);
        int sent = 0;
        for (const auto& s : a.sends)
            if (s.msg.kind == proto::MessageKind::control && s.msg.chunk == 1) {
                log.steps_by_receiver[s.msg.receiver].push_back(s.msg.round);
                ++sent;
            }
        log.per_step.push_back(sent);
    }
    return log;
}

}  // namespace

TEST_CASE("async reports: a small in-degree hears every report_every steps, all at once") {
    // A ring: 2 in-neighbours, report_every 4 >= 2: the rule of before, unchanged.
    std::int64_t period = 0;
    const ReportLog log = reports_of("ring", 8, 3, 24, {}, &period);
    CHECK(period == 4);
    REQUIRE(log.steps_by_receiver.size() == 2);
    for (const auto& [j, steps] : log.steps_by_receiver)
        CHECK(steps == std::vector<std::int64_t>{1, 4, 8, 12, 16, 20});
}

TEST_CASE("async reports: a large in-degree is served round robin, each every ceil(d / k) steps") {
    // One-peer exponential over 1,024 peers: 10 in-neighbours in the base graph.
    std::int64_t period = 0;
    const std::int64_t steps = 60;
    const ReportLog log = reports_of("one_peer_exponential", 1024, 17, steps, {}, &period);
    CHECK(period == 10);
    REQUIRE(log.steps_by_receiver.size() == 10);
    for (const auto& [j, heard] : log.steps_by_receiver) {
        // Every in-neighbour hears every `period` steps, never twice within one.
        REQUIRE(heard.size() >= 5);
        for (std::size_t i = 1; i < heard.size(); ++i) CHECK(heard[i] - heard[i - 1] == period);
        CHECK(heard.front() <= period);
    }
    // One report a step, never a burst to every in-neighbour (the last step sends none: the peer
    // says it finished instead).
    CHECK(log.per_step.back() == 0);
    for (std::size_t t = 0; t + 1 < log.per_step.size(); ++t) CHECK(log.per_step[t] == 1);

    SUBCASE("two targets: half the period, two a step") {
        proto::AsyncOptions o;
        o.targets = 2;
        const ReportLog two = reports_of("one_peer_exponential", 1024, 17, steps, o, &period);
        CHECK(period == 5);
        for (std::size_t t = 0; t + 1 < two.per_step.size(); ++t) CHECK(two.per_step[t] == 2);
    }
}
