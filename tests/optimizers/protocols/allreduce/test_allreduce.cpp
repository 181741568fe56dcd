#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "optimizers/harness/harness.hpp"
#include "optimizers/harness/workers.hpp"

using namespace gossamer;
using namespace gossamer::proto;
using gossamer::testing::Harness;
using gossamer::testing::HarnessOptions;
using gossamer::testing::StandInWorker;

namespace {

// Rank r's gradient entry i at step t: values in [-1, 1] that differ between ranks and steps.
float grad_value(int r, std::int64_t t, std::size_t i) {
    return static_cast<float>(std::sin(1.3 * r + 0.7 * double(i) + 0.9 * double(t) + 0.1));
}

Harness ring_of(int n, std::size_t length, std::int64_t steps, AllreduceOptions o,
                bool shuffle = false, std::uint64_t seed = 1, bool zero_copy = false) {
    std::vector<std::unique_ptr<LocalWorker>> workers;
    for (int r = 0; r < n; ++r)
        workers.push_back(std::make_unique<StandInWorker>(
            std::vector<float>(length, 0.5f),
            [r](std::int64_t t, std::span<const float>, std::span<float> g) {
                for (std::size_t i = 0; i < g.size(); ++i) g[i] = grad_value(r, t, i);
            }));
    HarnessOptions ho;
    ho.check_edge_seq = true;
    ho.max_steps = steps;
    ho.shuffle = shuffle;
    ho.seed = seed;
    ho.zero_copy = zero_copy;
    return Harness(
        std::move(workers),
        [o](PeerContext ctx) { return std::make_unique<AllreduceProtocol>(std::move(ctx), o); },
        ho);
}

const StandInWorker& stand_in(Harness& h, int r) {
    return dynamic_cast<const StandInWorker&>(h.worker(r));
}

std::uint64_t segment_size(std::size_t length, int n, int s) {
    return length / n + (static_cast<std::size_t>(s) < length % n ? 1 : 0);
}

}  // namespace

TEST_CASE("allreduce: every peer applies the average gradient, n = 1..17, any length") {
    std::int64_t early = 0;
    for (int n = 1; n <= 17; ++n) {
        // Shorter than n (some segments empty), one more than n, and 2n + 3.
        for (std::size_t length :
             {std::size_t(n > 1 ? n - 1 : 2), std::size_t(n + 1), std::size_t(2 * n + 3)}) {
            for (int chunks : {1, 3}) {
                for (bool shuffle : {false, true}) {
                    CAPTURE(n);
                    CAPTURE(length);
                    CAPTURE(chunks);
                    CAPTURE(shuffle);
                    const std::int64_t steps = 2;
                    Harness h = ring_of(n, length, steps, {1, chunks}, shuffle, 100 + n);
                    REQUIRE(h.run());
                    early += h.delivered_while_stepping();
                    int wrong = 0, differ = 0;
                    for (int r = 0; r < n; ++r) {
                        const auto& applied = stand_in(h, r).applied();
                        REQUIRE(applied.size() == std::size_t(steps));
                        for (std::int64_t t = 0; t < steps; ++t) {
                            for (std::size_t i = 0; i < length; ++i) {
                                double sum = 0;
                                for (int q = 0; q < n; ++q) sum += grad_value(q, t, i);
                                if (std::fabs(applied[t][i] - sum / n) > 1e-6) ++wrong;
                            }
                        }
                        // Bitwise: the same average and the same parameters everywhere.
                        if (applied != stand_in(h, 0).applied() || h.model(r) != h.model(0))
                            ++differ;
                        CHECK(h.protocol(r).stats().messages_sent ==
                              std::uint64_t(steps * 2 * (n - 1) * chunks));
                        CHECK(h.protocol(r).stats().rounds == steps);
                    }
                    CHECK(wrong == 0);
                    CHECK(differ == 0);
                    std::uint64_t elements = 0;
                    for (const auto& m : h.sent()) elements += m.elements;
                    CHECK(elements == std::uint64_t(steps * 2 * (n - 1)) * length);
                }
            }
        }
    }
    CHECK(early > 0);  // the shuffled runs did deliver messages ahead of their step
}

TEST_CASE("allreduce: exactly 2(n-1) messages per peer per all-reduce, to its successor") {
    const int n = 5;
    const std::size_t length = 13;
    for (int chunks : {1, 4}) {
        CAPTURE(chunks);
        Harness h = ring_of(n, length, 3, {1, chunks});
        REQUIRE(h.run());
        // (sender, round) -> the chunk indices and elements it sent.
        std::map<std::pair<int, std::int64_t>, std::multiset<std::uint32_t>> chunks_sent;
        std::map<std::pair<int, std::int64_t>, std::uint64_t> elements;
        for (const auto& m : h.sent()) {
            CHECK(m.kind == MessageKind::reduce);
            CHECK(m.receiver == (m.sender + 1) % n);
            CHECK(m.payload.size() == m.elements);
            chunks_sent[{m.sender, m.round}].insert(m.chunk);
            elements[{m.sender, m.round}] += m.elements;
        }
        CHECK(chunks_sent.size() == std::size_t(n * 3));
        std::multiset<std::uint32_t> every;
        for (std::uint32_t c = 0; c < std::uint32_t(2 * (n - 1) * chunks); ++c) every.insert(c);
        for (const auto& [key, got] : chunks_sent) CHECK(got == every);
        // A peer sends every segment but its successor's (reduce-scatter) and every segment but
        // the one after that (all-gather).
        for (const auto& [key, got] : elements) {
            const int r = key.first;
            CHECK(got == 2 * length - segment_size(length, n, (r + 1) % n) -
                             segment_size(length, n, (r + 2) % n));
        }
    }
}

TEST_CASE("allreduce: a message that comes before the peer's own step waits for it") {
    std::vector<std::unique_ptr<StandInWorker>> w;
    std::vector<std::unique_ptr<AllreduceProtocol>> p;
    for (int r = 0; r < 2; ++r) {
        w.push_back(std::make_unique<StandInWorker>(
            std::vector<float>{1, 1, 1},
            [r](std::int64_t, std::span<const float>, std::span<float> g) {
                for (auto& v : g) v = float(r + 1);
            }));
        PeerContext ctx{r, 2, nullptr, w.back().get(), 1};
        p.push_back(std::make_unique<AllreduceProtocol>(ctx));
    }
    Actions a0, a1;
    p[0]->start(0, a0);
    p[1]->start(0, a1);
    CHECK(a0.start_step);
    CHECK(a1.start_step);
    a0 = {};
    w[0]->compute_gradient(p[0]->compute_point());
    p[0]->step_finished(1, 0, a0);
    REQUIRE(a0.sends.size() == 1);  // reduce-scatter: its segment 0 to rank 1

    a1 = {};
    p[1]->message_arrived(2, a0.sends[0].msg, a1);  // rank 1 is still computing
    CHECK(a1.sends.empty());
    CHECK(p[1]->buffered() == 1);
    CHECK(p[1]->stepping());

    a1 = {};
    w[1]->compute_gradient(p[1]->compute_point());
    p[1]->step_finished(3, 0, a1);
    CHECK(p[1]->buffered() == 0);
    REQUIRE(a1.sends.size() == 2);  // its reduce-scatter chunk and the finished segment 0
    CHECK(a1.sends[1].msg.chunk == 1);
    CHECK(a1.sends[1].msg.payload == std::vector<float>{1.5f, 1.5f});

    a0 = {};
    p[0]->message_arrived(4, a1.sends[0].msg, a0);  // segment 1, reduced and finished
    p[0]->message_arrived(5, a1.sends[1].msg, a0);
    CHECK(a0.done);
    a1 = {};
    p[1]->message_arrived(6, a0.sends.at(0).msg, a1);
    CHECK(a1.done);
    CHECK(w[0]->applied() == w[1]->applied());
    CHECK(w[0]->applied().at(0) == std::vector<float>{1.5f, 1.5f, 1.5f});
}

TEST_CASE("allreduce: messages reordered on one edge still land in their round and step") {
    for (int n : {2, 3, 6}) {
        for (std::uint64_t seed = 1; seed <= 20; ++seed) {
            CAPTURE(n);
            CAPTURE(seed);
            std::vector<std::unique_ptr<LocalWorker>> workers;
            for (int r = 0; r < n; ++r)
                workers.push_back(std::make_unique<StandInWorker>(
                    std::vector<float>(7, 0.5f),
                    [r](std::int64_t t, std::span<const float>, std::span<float> g) {
                        for (std::size_t i = 0; i < g.size(); ++i) g[i] = grad_value(r, t, i);
                    }));
            HarnessOptions ho;
            ho.check_edge_seq = true;
            ho.max_steps = 4;
            ho.shuffle = true;
            ho.fifo_channels = false;
            ho.seed = seed;
            const AllreduceOptions o{1, 2};
            Harness h(
                std::move(workers),
                [o](PeerContext ctx) {
                    return std::make_unique<AllreduceProtocol>(std::move(ctx), o);
                },
                ho);
            REQUIRE(h.run());
            for (int r = 0; r < n; ++r) {
                const auto& applied = stand_in(h, r).applied();
                REQUIRE(applied.size() == 4);
                CHECK(applied == stand_in(h, 0).applied());
                double sum = 0;
                for (int q = 0; q < n; ++q) sum += grad_value(q, 3, 6);
                CHECK(applied[3][6] == doctest::Approx(sum / n).epsilon(1e-6));
            }
        }
    }
}

TEST_CASE("allreduce: zero-copy (borrowed sends, placed all-gather) gives the same bits") {
    std::int64_t borrowed = 0, placed = 0;
    for (int n = 1; n <= 9; ++n) {
        for (std::size_t length : {std::size_t(n > 1 ? n - 1 : 2), std::size_t(3 * n + 2)}) {
            for (int chunks : {1, 3}) {
                for (int period : {1, 2}) {
                    for (bool shuffle : {false, true}) {
                        CAPTURE(n);
                        CAPTURE(length);
                        CAPTURE(chunks);
                        CAPTURE(period);
                        CAPTURE(shuffle);
                        const AllreduceOptions o{period, chunks};
                        Harness plain = ring_of(n, length, 5, o, shuffle, 40 + n);
                        Harness zero = ring_of(n, length, 5, o, shuffle, 40 + n, true);
                        REQUIRE(plain.run());
                        REQUIRE(zero.run());  // the harness checks every lent buffer
                        for (int r = 0; r < n; ++r) {
                            CHECK(stand_in(zero, r).applied() == stand_in(plain, r).applied());
                            CHECK(zero.model(r) == plain.model(r));
                            CHECK(zero.protocol(r).stats().bytes_sent ==
                                  plain.protocol(r).stats().bytes_sent);
                        }
                        borrowed += zero.borrowed_sends();
                        placed += zero.placed_messages();
                        CHECK(plain.borrowed_sends() + plain.placed_messages() == 0);
                    }
                }
            }
        }
    }
    CHECK(borrowed > 0);
    CHECK(placed > 0);
}

TEST_CASE("allreduce: a message out of the schedule is rejected") {
    Harness h = ring_of(3, 5, 1, {});
    h.run([&] { return h.events() > 0; });
    Message m;
    m.kind = MessageKind::reduce;
    m.sender = 1;  // rank 0 hears only from rank 2
    Actions out;
    CHECK_THROWS_AS(h.protocol(0).message_arrived(h.now(), m, out), Error);
    m.sender = 2;
    m.elements = 4;  // chunk 0 carries segment 2, one value at offset 4
    CHECK_THROWS_AS(h.protocol(0).message_arrived(h.now(), m, out), Error);
}

TEST_CASE("allreduce: cost-only peers send the same messages with empty payloads") {
    const int n = 6;
    const std::size_t length = 23;
    for (int period : {1, 3}) {
        CAPTURE(period);
        const AllreduceOptions o{period, 2};
        Harness real = ring_of(n, length, 7, o);
        std::vector<std::unique_ptr<LocalWorker>> workers;
        for (int r = 0; r < n; ++r) workers.push_back(std::make_unique<CostOnlyWorker>(length));
        HarnessOptions ho;
        ho.check_edge_seq = true;
        ho.max_steps = 7;
        Harness cost(
            std::move(workers),
            [o](PeerContext ctx) { return std::make_unique<AllreduceProtocol>(std::move(ctx), o); },
            ho);
        REQUIRE(real.run());
        REQUIRE(cost.run());
        using Header = std::tuple<int, int, std::int64_t, std::uint32_t, std::uint64_t,
                                  std::uint64_t, std::uint64_t>;
        const auto headers = [](const Harness& h) {
            std::multiset<Header> out;
            for (const auto& m : h.sent())
                out.insert(
                    {m.sender, m.receiver, m.round, m.chunk, m.offset, m.elements, m.edge_seq});
            return out;
        };
        CHECK(headers(real) == headers(cost));
        std::size_t values = 0;
        for (const auto& m : cost.sent()) values += m.payload.size();
        CHECK(values == 0);
        const std::int64_t rounds = period == 1 ? 7 : 3;  // after steps 3, 6 and the last, 7
        for (int r = 0; r < n; ++r) {
            CHECK(cost.worker(r).steps() == 7);
            CHECK(cost.protocol(r).stats().rounds == rounds);
            CHECK(cost.protocol(r).stats().messages_sent ==
                  std::uint64_t(rounds * 2 * (n - 1) * 2));
            CHECK(cost.protocol(r).stats().bytes_sent == real.protocol(r).stats().bytes_sent);
        }
    }
}

TEST_CASE("allreduce: a failed peer stops every other peer, which report its rank") {
    const int n = 5;
    for (std::int64_t when : {0, 1, 7, 23, 60, 111}) {
        for (bool shuffle : {false, true}) {
            CAPTURE(when);
            CAPTURE(shuffle);
            for (bool zero_copy : {false, true}) {
                CAPTURE(zero_copy);
                Harness h = ring_of(n, 11, 50, {}, shuffle, 7, zero_copy);
                h.run([&] { return h.events() >= when; });
                REQUIRE_FALSE(h.all_done());
                h.fail(2);
                CHECK(h.run());  // nobody hangs waiting for rank 2
                for (int r = 0; r < n; ++r) {
                    if (r == 2) continue;
                    CHECK(h.protocol(r).done());
                    CHECK(h.as<AllreduceProtocol>(r).failed_rank() == 2);
                }
            }
        }
    }
    // A failure after the last all-reduce changes nothing.
    Harness h = ring_of(n, 11, 2, {});
    REQUIRE(h.run());
    h.fail(4);
    for (int r = 0; r < 4; ++r) CHECK_FALSE(h.as<AllreduceProtocol>(r).failed_rank());
}

TEST_CASE("allreduce options: period and chunks, ConfigError naming the JSON path") {
    const json::Document doc = json::parse_text(R"({
        "ok": {"period": 4, "chunks": 2}, "typo": {"chunk": 2}, "zero": {"period": 0},
        "text": {"period": "2"}, "many": {"chunks": 70000}, "list": [1]})",
                                                "train.json");
    const json::Node root(doc);
    const json::Node ok_node = root.at("ok");
    const AllreduceOptions ok = parse_allreduce_options(&ok_node);
    CHECK(ok.period == 4);
    CHECK(ok.chunks == 2);
    CHECK(parse_allreduce_options(nullptr).period == 1);
    CHECK(parse_allreduce_options(nullptr).chunks == 1);

    CostOnlyWorker worker(10);
    const PeerContext ctx{0, 2, nullptr, &worker, 5};
    const auto path_of = [&](const char* key) -> std::string {
        const json::Node node = root.at(key);
        try {
            make_allreduce(&node, ctx);
        } catch (const ConfigError& e) {
            CHECK(e.file() == "train.json");
            return e.path();
        }
        return "(no error)";
    };
    CHECK(path_of("typo") == "typo.chunk");
    CHECK(path_of("zero") == "zero.period");
    CHECK(path_of("text") == "text.period");
    CHECK(path_of("many") == "many.chunks");
    CHECK(path_of("list") == "list");
    CHECK(make_allreduce(&ok_node, ctx)->name() == "allreduce");
    CHECK_THROWS_AS(AllreduceProtocol(ctx, {0, 1}), ConfigError);
    CHECK_THROWS_AS(AllreduceProtocol(ctx, {1, 0}), ConfigError);
}
