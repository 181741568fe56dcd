// proto::ActionApplier, which both drivers (sim::Engine, peer::Loop) apply a protocol's Actions
// through: the order of the effects, the bound on data messages in flight per edge and its error
// in each driver's wording, deadlines never in the past, done taken once, and which events a done
// peer still takes.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/action_applier.hpp"

using namespace gossamer;
using proto::ActionApplier;
using proto::Actions;
using transport::MessageKind;

namespace {

// A protocol that does nothing by itself: the tests say whether it bounds its edges, whether it
// is settled, and what its events answer.
class Probe final : public proto::Protocol {
  public:
    Probe(proto::LocalWorker& w, bool bounded, int rank = 1)
        : Protocol(proto::PeerContext{rank, 4, nullptr, &w, 10}), bounded_(bounded) {}
    std::string_view name() const override { return "probe"; }
    std::span<const float> compute_point() override { return {}; }
    void current_model(std::span<float>) const override {}
    bool one_in_flight_per_edge() const override { return bounded_; }
    bool settled() const override { return done() && settled_; }
    bool settled_ = true;
    Actions answer;  // what the next event answers

  protected:
    void on_start(proto::Time, Actions& out) override { out = answer; }
    void on_step_finished(proto::Time, double, Actions&) override {}
    void on_message(proto::Time, transport::Message, Actions&) override {}

  private:
    bool bounded_;
};

// Records every call, in order, as one line.
struct Recorder final : proto::ActionTarget {
    std::vector<std::string> calls;
    void refused(const proto::Refusal& r) override {
        calls.push_back(fmt::format("refused {} round {}: {}", r.sender, r.round, r.reason));
    }
    void send(proto::Send& s, bool counted) override {
        calls.push_back(fmt::format("send {} to {} seq {} chunk {}{}", s.id, s.msg.receiver,
                                    s.msg.edge_seq, s.msg.chunk, counted ? " counted" : ""));
    }
    void deadline(proto::Time at, std::uint64_t id) override {
        calls.push_back(fmt::format("deadline {} at {}", id, at));
    }
    void start_step() override { calls.emplace_back("start_step"); }
    void done() override { calls.emplace_back("done"); }
};

proto::Send data(std::uint64_t id, int to, std::uint64_t seq = 0, std::uint32_t chunk = 0,
                 MessageKind kind = MessageKind::mass_share) {
    proto::Send s;
    s.id = id;
    s.msg.kind = kind;
    s.msg.sender = 1;
    s.msg.receiver = to;
    s.msg.edge_seq = seq;
    s.msg.chunk = chunk;
    return s;
}

Actions sends(std::vector<proto::Send> s) {
    Actions a;
    a.sends = std::move(s);
    return a;
}

struct Fixture {
    proto::CostOnlyWorker worker{4};
    Recorder target;
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "ActionApplier: refusals, sends, deadlines, start_step, then done") {
    Probe p(worker, false);
    ActionApplier applier;
    Actions a;
    a.done = true;
    a.start_step = true;
    a.deadlines = {{5.0, 7}, {1.0, 8}};  // the second lies in the past: due now
    a.sends = {data(1, 2), data(2, 3)};
    a.refused = {{0, MessageKind::mass_share, 4, 0, "NaN at element 1 of partition 0"}};
    applier.apply(p, 2.5, a, target);
    CHECK(target.calls ==
          std::vector<std::string>{"refused 0 round 4: NaN at element 1 of partition 0",
                                   "send 1 to 2 seq 0 chunk 0", "send 2 to 3 seq 0 chunk 0",
                                   "deadline 7 at 5", "deadline 8 at 2.5", "start_step", "done"});
    CHECK(applier.done());
}

TEST_CASE_FIXTURE(Fixture, "ActionApplier: done is applied once, and then deadlines stop") {
    Probe p(worker, false);
    ActionApplier applier;
    CHECK(applier.takes_deadline());
    Actions a;
    a.done = true;
    applier.apply(p, 1.0, a, target);
    applier.apply(p, 2.0, a, target);
    CHECK(target.calls == std::vector<std::string>{"done"});
    CHECK_FALSE(applier.takes_deadline());
    // Deadlines asked for with done still reach the driver: only their delivery stops.
    a.deadlines = {{3.0, 1}};
    applier.apply(p, 2.0, a, target);
    CHECK(target.calls.back() == "deadline 1 at 3");
}

TEST_CASE_FIXTURE(Fixture, "ActionApplier: its done is the protocol's done") {
    Probe p(worker, false);
    ActionApplier applier;
    p.answer.done = true;
    Actions a;
    p.start(0.0, a);
    CHECK(p.done());
    CHECK_FALSE(applier.done());  // not applied yet
    applier.apply(p, 0.0, a, target);
    CHECK(applier.done() == p.done());
}

TEST_CASE_FIXTURE(Fixture, "ActionApplier: a done peer takes failures until it is settled") {
    Probe p(worker, false);
    p.settled_ = false;
    ActionApplier applier;
    CHECK(applier.takes_failure(p));
    p.answer.done = true;
    Actions a;
    p.start(0.0, a);
    applier.apply(p, 0.0, a, target);
    CHECK(applier.takes_failure(p));  // done, still waiting for its neighbours' last messages
    p.settled_ = true;
    CHECK_FALSE(applier.takes_failure(p));
}

TEST_CASE_FIXTURE(Fixture, "ActionApplier: a second data message on a bounded edge is an error") {
    Probe p(worker, true);
    ActionApplier applier;
    Actions a = sends({data(1, 2, 0), data(2, 2, 1)});
    a.start_step = a.done = true;
    CHECK_THROWS_WITH_AS(applier.apply(p, 1.5, a, target),
                         "probe: rank 1 sent a second mass_share on edge 1 -> 2 while one is in "
                         "flight; the protocol keeps at most one in flight per edge",
                         Error);
    // The send before it was handed over; nothing after it was applied.
    CHECK(target.calls == std::vector<std::string>{"send 1 to 2 seq 0 chunk 0 counted"});
    CHECK_FALSE(applier.done());
}

TEST_CASE_FIXTURE(Fixture, "ActionApplier: the simulator's wording names the peer and the time") {
    Probe p(worker, true, 3);
    ActionApplier applier({"peer", true});
    Actions a = sends({data(1, 0, 4, 0, MessageKind::full_model)});
    applier.apply(p, 0.25, a, target);
    a = sends({data(2, 0, 5, 0, MessageKind::full_model)});
    CHECK_THROWS_WITH_AS(applier.apply(p, 1.5, a, target),
                         "probe: peer 3 sent a second full_model on edge 3 -> 0 at 1.500000 s "
                         "while one is in flight; the protocol keeps at most one in flight per "
                         "edge",
                         Error);
}

TEST_CASE_FIXTURE(Fixture, "ActionApplier: what counts against an edge's bound") {
    SUBCASE("later chunks of the message in flight count as one") {
        Probe p(worker, true);
        ActionApplier applier;
        Actions a = sends({data(1, 2, 6, 0), data(2, 2, 6, 1), data(3, 2, 6, 2)});
        applier.apply(p, 0.0, a, target);
        CHECK(target.calls.size() == 3);
        a = sends({data(4, 2, 6, 1)});  // an earlier chunk again: another message
        CHECK_THROWS_AS(applier.apply(p, 0.0, a, target), Error);
    }
    SUBCASE("control messages are not counted") {
        Probe p(worker, true);
        ActionApplier applier;
        Actions a = sends({data(1, 2, 0, 0, MessageKind::control),
                           data(2, 2, 1, 0, MessageKind::control), data(3, 2, 2)});
        applier.apply(p, 0.0, a, target);
        CHECK(target.calls == std::vector<std::string>{"send 1 to 2 seq 0 chunk 0",
                                                       "send 2 to 2 seq 1 chunk 0",
                                                       "send 3 to 2 seq 2 chunk 0 counted"});
    }
    SUBCASE("each edge has its own bound, and a completion frees it") {
        Probe p(worker, true);
        ActionApplier applier;
        Actions a = sends({data(1, 2, 0), data(2, 3, 0)});
        applier.apply(p, 0.0, a, target);
        applier.completed(2);
        a = sends({data(3, 2, 1)});
        applier.apply(p, 0.0, a, target);
        a = sends({data(4, 3, 1)});  // the edge to 3 is still busy
        CHECK_THROWS_AS(applier.apply(p, 0.0, a, target), Error);
    }
    SUBCASE("a protocol that promises no bound has none") {
        Probe p(worker, false);
        ActionApplier applier;
        Actions a = sends({data(1, 2, 0), data(2, 2, 1), data(3, 2, 2)});
        applier.apply(p, 0.0, a, target);
        CHECK(target.calls == std::vector<std::string>{"send 1 to 2 seq 0 chunk 0",
                                                       "send 2 to 2 seq 1 chunk 0",
                                                       "send 3 to 2 seq 2 chunk 0"});
    }
}

TEST_CASE_FIXTURE(Fixture, "ActionApplier: reset starts a new incarnation") {
    Probe p(worker, true);
    ActionApplier applier;
    Actions a = sends({data(1, 2, 0)});
    a.done = true;
    applier.apply(p, 0.0, a, target);
    CHECK(applier.done());
    applier.reset();
    CHECK_FALSE(applier.done());
    CHECK(applier.takes_deadline());
    a = sends({data(2, 2, 0)});  // the edge's message in flight went with the old incarnation
    a.done = true;
    applier.apply(p, 1.0, a, target);
    CHECK(target.calls.back() == "done");
}
