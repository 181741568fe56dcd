// The harness in virtual seconds (step times, delays, kill with a notice, drops and holds) and
// the layers it builds peers with.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "optimizers/harness/harness.hpp"
#include "optimizers/harness/layers.hpp"
#include "optimizers/harness/workers.hpp"

using namespace gossamer;
using namespace gossamer::proto;
using gossamer::testing::Clock;
using gossamer::testing::Harness;
using gossamer::testing::HarnessOptions;
using gossamer::testing::Peers;

namespace {

// After each step sends one message to the next rank; records when everything happens.
class Stamp final : public Protocol {
  public:
    using Protocol::Protocol;
    std::string_view name() const override { return "stamp"; }
    std::span<const float> compute_point() override { return context().worker->params(); }
    void current_model(std::span<float> out) const override {
        out[0] = context().worker->params()[0];
    }

    std::vector<Time> steps_done, arrivals, completed;
    std::vector<bool> completed_ok;
    std::vector<int> failures;

  protected:
    void on_start(Time, Actions& out) override { out.start_step = true; }
    void on_step_finished(Time now, double, Actions& out) override {
        steps_done.push_back(now);
        Message m;
        m.receiver = (rank() + 1) % n();
        m.edge_seq = static_cast<std::uint64_t>(steps_++);
        send(out, std::move(m));
        if (steps_ < context().max_steps)
            out.start_step = true;
        else
            out.done = true;
    }
    void on_message(Time now, Message, Actions&) override { arrivals.push_back(now); }
    void on_send_completed(Time now, std::uint64_t, bool ok, Actions&) override {
        completed.push_back(now);
        completed_ok.push_back(ok);
    }
    void on_peer_failed(Time, int r, Actions&) override { failures.push_back(r); }

  private:
    std::int64_t steps_ = 0;
};

Peers stamps(int n) {
    Peers p;
    p.n = n;
    p.worker = [](int) {
        return std::make_unique<testing::StandInWorker>(
            std::vector<float>{0.0f},
            [](std::int64_t, std::span<const float>, std::span<float> g) { g[0] = 0; });
    };
    p.protocol = [](PeerContext ctx) { return std::make_unique<Stamp>(std::move(ctx)); };
    return p;
}

HarnessOptions seconds(std::int64_t steps) {
    HarnessOptions o = testing::seconds_clock();
    o.max_steps = steps;
    o.delay = 0.5;
    return o;
}

}  // namespace

TEST_CASE("harness: in seconds a step takes its rank's step time and a message its delay") {
    HarnessOptions o = seconds(2);
    o.step_times = {1.0, 3.0};
    Harness h(stamps(2), o);
    REQUIRE(h.run());
    const auto& a = h.as<Stamp>(0);
    const auto& b = h.as<Stamp>(1);
    CHECK(a.steps_done == std::vector<Time>{1.0, 2.0});
    CHECK(b.steps_done == std::vector<Time>{3.0, 6.0});
    CHECK(b.arrivals == std::vector<Time>{1.5, 2.5});
    CHECK(a.arrivals == std::vector<Time>{3.5, 6.5});
    CHECK(a.completed == std::vector<Time>{1.5, 2.5});  // when its message arrived
    CHECK(h.now() == 6.5);
    CHECK(h.events() == 12);  // 4 steps, 4 messages, 4 completions
}

TEST_CASE("harness: kill in seconds, the others hear of it later, its messages are kept") {
    HarnessOptions o = seconds(3);
    o.failure_notice = 0.25;
    Harness h(stamps(3), o);
    h.kill(1, 1.2);
    CHECK(h.run());
    CHECK_FALSE(h.alive(1));
    CHECK(h.as<Stamp>(1).steps_done == std::vector<Time>{1.0});
    for (int r : {0, 2}) CHECK(h.as<Stamp>(r).failures == std::vector<int>{1});
    // Rank 0's messages reach rank 1 after its death: undeliverable, completed with ok = false.
    CHECK(h.undeliverable().size() == 3);
    CHECK(h.as<Stamp>(0).completed_ok == std::vector<bool>{false, false, false});
    CHECK(h.as<Stamp>(2).arrivals == std::vector<Time>{1.5});  // rank 1 sent once
}

TEST_CASE("harness: a dropped message never arrives and completes, a held one arrives late") {
    Harness h(stamps(2), seconds(2));
    int seen = 0;
    h.drop = [&](const Message& m) { return m.sender == 0 && seen++ == 0; };
    h.hold = [](const Message& m) { return m.sender == 1 ? 2.0 : 0.0; };
    REQUIRE(h.run());
    CHECK(h.dropped() == 1);
    CHECK(h.sent().size() == 4);  // the log has it
    CHECK(h.as<Stamp>(1).arrivals == std::vector<Time>{2.5});
    CHECK(h.as<Stamp>(0).completed.size() == 2);
    CHECK(h.as<Stamp>(0).arrivals == std::vector<Time>{3.5, 4.5});
}

TEST_CASE("harness: worker layers and protocol layers wrap each peer, innermost first") {
    Peers p = stamps(2);
    std::vector<std::string> order;
    for (const char* tag : {"inner", "outer"})
        p.worker_layers.push_back([&order, tag](std::unique_ptr<LocalWorker> w, int rank) {
            order.push_back(std::string(tag) + " " + std::to_string(rank));
            return std::make_unique<testing::GuardedWorker>(std::move(w));
        });
    p.protocol_layers.push_back(testing::pass_through());
    HarnessOptions o;
    o.max_steps = 3;
    Harness h(p, o);
    CHECK(order == std::vector<std::string>{"inner 0", "outer 0", "inner 1", "outer 1"});
    REQUIRE(h.run());
    auto& layer = h.as<testing::PassThrough>(0);
    CHECK(dynamic_cast<Stamp&>(layer.inner()).steps_done.size() == 3);
    CHECK(dynamic_cast<testing::GuardedWorker*>(&h.worker(1)) != nullptr);
    CHECK(h.sent().size() == 6);
}
