#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <stdexcept>

#include "optimizers/harness/harness.hpp"
#include "optimizers/harness/workers.hpp"

using namespace gossamer;
using namespace gossamer::proto;
using gossamer::testing::Harness;
using gossamer::testing::HarnessOptions;
using gossamer::testing::StandInWorker;

namespace {

// A toy protocol that exercises every event: after each step it sends `burst` messages to every
// other peer and waits for a deadline 10 time units later before the next step.
class Ping final : public Protocol {
  public:
    Ping(PeerContext ctx, int burst) : Protocol(std::move(ctx)), burst_(burst) {}
    std::string_view name() const override { return "ping"; }
    std::span<const float> compute_point() override { return context().worker->params(); }
    void current_model(std::span<float> out) const override {
        const auto x = context().worker->params();
        std::copy(x.begin(), x.end(), out.begin());
    }

    struct Arrival {
        int sender;
        std::uint64_t edge_seq;
        bool while_stepping;
    };
    std::vector<Arrival> arrivals;
    std::vector<std::pair<Time, Time>> deadlines;  // (asked for, delivered at)
    int sends_ok = 0, sends_failed = 0;
    std::vector<int> failures;
    bool scribble = false;  // breaks the ownership rule on purpose

  protected:
    void on_start(Time, Actions& out) override { out.start_step = true; }
    void on_step_finished(Time now, double, Actions& out) override {
        ++steps_;
        for (int to = 0; to < n(); ++to) {
            if (to == rank()) continue;
            for (int b = 0; b < burst_; ++b) {
                Message m;
                m.receiver = to;
                m.edge_seq = seq_[to]++;
                send(out, std::move(m));
            }
        }
        out.deadlines.push_back({now + 10, static_cast<std::uint64_t>(steps_)});
        asked_.push_back(now + 10);
    }
    void on_message(Time, Message msg, Actions&) override {
        arrivals.push_back({msg.sender, msg.edge_seq, stepping()});
        if (scribble && stepping()) context().worker->params()[0] += 1.0f;
    }
    void on_send_completed(Time, std::uint64_t, bool ok, Actions&) override {
        ok ? ++sends_ok : ++sends_failed;
    }
    void on_deadline(Time now, std::uint64_t id, Actions& out) override {
        deadlines.push_back({asked_.at(id - 1), now});
        if (steps_ >= context().max_steps)
            out.done = true;
        else
            out.start_step = true;
    }
    void on_peer_failed(Time, int r, Actions&) override { failures.push_back(r); }

  private:
    int burst_;
    std::int64_t steps_ = 0;
    std::map<int, std::uint64_t> seq_;
    std::vector<Time> asked_;
};

Harness pings(int n, HarnessOptions ho, int burst = 3) {
    std::vector<std::unique_ptr<LocalWorker>> workers;
    for (int r = 0; r < n; ++r)
        workers.push_back(std::make_unique<StandInWorker>(
            std::vector<float>{0.0f},
            [](std::int64_t, std::span<const float>, std::span<float> g) { g[0] = 0; }));
    return Harness(
        std::move(workers),
        [burst](PeerContext ctx) { return std::make_unique<Ping>(std::move(ctx), burst); }, ho);
}

std::vector<std::pair<int, std::uint64_t>> arrival_order(Harness& h, int r) {
    std::vector<std::pair<int, std::uint64_t>> out;
    for (const auto& a : h.as<Ping>(r).arrivals) out.push_back({a.sender, a.edge_seq});
    return out;
}

}  // namespace

TEST_CASE("harness: every event kind reaches the protocols, and deadlines never fire early") {
    HarnessOptions ho;
    ho.check_edge_seq = true;
    ho.max_steps = 4;
    Harness h = pings(4, ho);
    REQUIRE(h.run());
    for (int r = 0; r < 4; ++r) {
        const Ping& p = h.as<Ping>(r);
        CHECK(h.steps_started(r) == 4);
        CHECK(h.losses(r).size() == 4);
        CHECK(p.arrivals.size() == 4 * 3 * 3);
        CHECK(p.sends_ok == 4 * 3 * 3);
        REQUIRE(p.deadlines.size() == 4);
        for (const auto& [asked, at] : p.deadlines) CHECK(at >= asked);
    }
    CHECK(h.sent().size() == 4 * 4 * 9);
}

TEST_CASE("harness: FIFO and seeded orders are reproducible, and channels stay FIFO") {
    HarnessOptions ho;
    ho.check_edge_seq = true;
    ho.max_steps = 3;
    Harness a = pings(5, ho), b = pings(5, ho);
    a.run();
    b.run();
    CHECK(arrival_order(a, 0) == arrival_order(b, 0));

    ho.shuffle = true;
    std::set<std::vector<std::pair<int, std::uint64_t>>> orders;
    std::int64_t early = 0;
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        ho.seed = seed;
        Harness s = pings(5, ho), t = pings(5, ho);
        REQUIRE(s.run());
        t.run();
        CHECK(arrival_order(s, 0) == arrival_order(t, 0));
        orders.insert(arrival_order(s, 0));
        early += s.delivered_while_stepping();
        // Per sender, edge_seq arrives in order.
        std::map<int, std::uint64_t> next;
        for (const auto& [sender, seq] : arrival_order(s, 0)) CHECK(seq == next[sender]++);
    }
    CHECK(orders.size() > 1);
    CHECK(early > 0);

    // Without FIFO channels, some message overtakes another on its edge.
    ho.fifo_channels = false;
    bool overtaken = false;
    for (std::uint64_t seed = 1; seed <= 5 && !overtaken; ++seed) {
        ho.seed = seed;
        Harness s = pings(5, ho);
        REQUIRE(s.run());
        std::map<int, std::uint64_t> next;
        for (const auto& [sender, seq] : arrival_order(s, 0))
            overtaken = overtaken || seq != next[sender]++;
    }
    CHECK(overtaken);
}

TEST_CASE("harness: a failed rank gets nothing more and the others hear of it") {
    HarnessOptions ho;
    ho.check_edge_seq = true;
    ho.max_steps = 3;
    Harness h = pings(3, ho);
    h.run([&] { return h.events() >= 4; });
    h.fail(1);
    CHECK_FALSE(h.alive(1));
    const auto arrived = h.as<Ping>(1).arrivals.size();
    CHECK(h.run());  // done means every live peer is done
    CHECK_FALSE(h.protocol(1).done());
    CHECK(h.as<Ping>(1).arrivals.size() == arrived);
    for (int r : {0, 2}) {
        CHECK(h.as<Ping>(r).failures == std::vector<int>{1});
        CHECK(h.as<Ping>(r).sends_failed > 0);  // sends to rank 1 complete with ok = false
    }
}

TEST_CASE("harness: a protocol that writes the compute point during a step is caught") {
    HarnessOptions ho;
    ho.check_edge_seq = true;
    ho.max_steps = 3;
    ho.shuffle = true;
    Harness h = pings(3, ho, 20);
    for (int r = 0; r < 3; ++r) h.as<Ping>(r).scribble = true;
    CHECK_THROWS_AS(h.run(), std::logic_error);
}

TEST_CASE("harness: edge_seq must count 0, 1, ... on every edge") {
    struct Skipper final : public Protocol {
        using Protocol::Protocol;
        std::string_view name() const override { return "skip"; }
        std::span<const float> compute_point() override { return {}; }
        void current_model(std::span<float>) const override {}
        void on_start(Time, Actions& out) override {
            Message m;
            m.receiver = 1 - rank();
            m.edge_seq = 1;  // should be 0
            send(out, std::move(m));
        }
        void on_step_finished(Time, double, Actions&) override {}
        void on_message(Time, Message, Actions&) override {}
    };
    std::vector<std::unique_ptr<LocalWorker>> workers;
    for (int r = 0; r < 2; ++r) workers.push_back(std::make_unique<CostOnlyWorker>(1));
    HarnessOptions ho;
    ho.check_edge_seq = true;
    Harness h(
        std::move(workers),
        [](PeerContext ctx) { return std::make_unique<Skipper>(std::move(ctx)); }, ho);
    CHECK_THROWS_AS(h.run(), std::logic_error);
}

namespace {

// Sends its one value borrowed to rank 1 after each step; with `scribble`, changes it when the
// next step finishes, which may be before the send completed.
class Lender final : public Protocol {
  public:
    Lender(PeerContext ctx, bool scribble) : Protocol(std::move(ctx)), scribble_(scribble) {}
    std::string_view name() const override { return "lender"; }
    std::span<const float> compute_point() override { return context().worker->params(); }
    void current_model(std::span<float> out) const override { out[0] = value_[0]; }
    std::span<float> receive_into(const Message&) override { return value_; }
    int completed = 0;

  protected:
    void on_start(Time, Actions& out) override { out.start_step = true; }
    void on_step_finished(Time, double, Actions& out) override {
        if (scribble_) value_[0] += 1.0f;
        if (rank() == 0) {
            Message m;
            m.receiver = 1;
            m.edge_seq = seq_++;
            m.elements = 1;
            send_borrowed(out, std::move(m), value_);
        }
        if (++steps_ < context().max_steps)
            out.start_step = true;
        else
            out.done = true;
    }
    void on_message(Time, Message msg, Actions&) override {
        if (!msg.placed) value_[0] = msg.payload.at(0);
    }
    void on_send_completed(Time, std::uint64_t, bool, Actions&) override { ++completed; }

  private:
    bool scribble_;
    std::array<float, 1> value_{7.0f};
    std::int64_t steps_ = 0;
    std::uint64_t seq_ = 0;
};

Harness lenders(bool scribble, bool zero_copy) {
    std::vector<std::unique_ptr<LocalWorker>> workers;
    for (int r = 0; r < 2; ++r)
        workers.push_back(std::make_unique<StandInWorker>(
            std::vector<float>{0.0f},
            [](std::int64_t, std::span<const float>, std::span<float> g) { g[0] = 0; }));
    HarnessOptions ho;
    ho.check_edge_seq = true;
    ho.max_steps = 5;
    ho.zero_copy = zero_copy;
    return Harness(
        std::move(workers),
        [scribble](PeerContext ctx) { return std::make_unique<Lender>(std::move(ctx), scribble); },
        ho);
}

}  // namespace

TEST_CASE("harness: zero-copy sends are read as sent, placed at once, and must stay unchanged") {
    Harness ok = lenders(false, true);
    REQUIRE(ok.run());
    CHECK(ok.borrowed_sends() == 5);
    CHECK(ok.placed_messages() == 5);  // rank 1 names its own value as the place, every time
    CHECK(ok.model(1) == std::vector<float>{7.0f});
    CHECK(ok.as<Lender>(0).completed == 5);
    // Changing the memory before the send completed is caught.
    Harness bad = lenders(true, true);
    CHECK_THROWS_WITH_AS(bad.run(), doctest::Contains("before it completed"), std::logic_error);
    // And a borrowed send to a driver that did not enable zero-copy is a defect of the protocol
    // (send_borrowed asserts in debug builds; the harness says so in every build).
#ifdef NDEBUG
    Harness plain = lenders(false, false);
    CHECK_THROWS_WITH_AS(plain.run(), doctest::Contains("without zero-copy"), std::logic_error);
#endif
}
