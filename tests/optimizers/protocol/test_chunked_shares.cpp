// Chunked push-sum (docs/algorithms/protocol-contract.md, "Chunked sends"): sgp and async cut each
// share into chunks of chunk_bytes, the weight w travelling with the last, and a receiver moves
// mass only once every chunk of a share has come. The mass stays exact (sum of w = n to 1e-9) under
// a straggler and a slow link, with and without the outbox, in the simulator and with inproc peers;
// where the order of events does not depend on message sizes the chunked job is the unchunked one
// bit for bit, and the simulator's is the inproc peers'.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/in_flight.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocol/share_chunks.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"
#include "gossamer/optimizers/protocols/sgp/sgp.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/simulation.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer;
using gossamer::testing::QuadraticWorker;

namespace {

proto::Message share_of(std::size_t size, double weight) {
    proto::Message m;
    m.kind = proto::MessageKind::mass_share;
    m.sender = 2;
    m.receiver = 5;
    m.round = 7;
    m.edge_seq = 3;
    m.sent_at = 1.5;
    m.weight = weight;
    m.elements = size;
    for (std::size_t k = 0; k < size; ++k) m.payload.push_back(0.1f * static_cast<float>(k) - 0.3f);
    return m;
}

std::vector<proto::Message> cut(const proto::Message& m, std::uint64_t values) {
    std::vector<proto::Message> chunks;
    proto::cut_share(m, values, [&](proto::Message c) {
        c.sender = m.sender;  // as Protocol::send stamps it
        chunks.push_back(std::move(c));
    });
    return chunks;
}

std::shared_ptr<const topology::Schedule> family(const char* name, int n) {
    topology::FamilySpec f;
    f.family = name;
    f.n = n;
    f.weights = topology::WeightRule::push_sum;
    return topology::generate(f);
}

optim::TrainingConfig logreg_config() {
    // softmax 10 -> 2: 22 values; chunk_bytes 32 cuts a share into 8 + 8 + 6 values.
    return optim::parse_training_config(json::parse_text(R"({"seed": 3,
        "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10, "seed": 4},
        "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.2},
        "schedule": {"schedule": "cosine"}, "training": {"epochs": 3, "batch_size": 25}})",
                                                         "logreg.json"));
}

sim::SimResult simulate(const std::string& algorithm, const std::string& options,
                        std::shared_ptr<const topology::Schedule> topo, const Cluster& cluster,
                        const optim::TrainingConfig& cfg, const optim::TrainingData& data) {
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.options = json::Node(json::parse_text(options, "options.json"));
    s.topology = std::move(topo);
    s.cluster = &cluster;
    s.config = &cfg;
    s.train = &data.train;
    s.test = &data.test;
    s.epochs = cfg.epochs;
    s.eval_interval = 1.0;
    return sim::simulate(s);
}

}  // namespace

TEST_CASE("chunked shares: cut in ranges, the weight with the last, put together bit for bit") {
    const auto m = share_of(10, 0.375);
    const auto chunks = cut(m, 3);
    REQUIRE(chunks.size() == 4);
    for (std::size_t k = 0; k < chunks.size(); ++k) {
        CAPTURE(k);
        CHECK(chunks[k].chunk == k);
        CHECK(chunks[k].offset == 3 * k);
        CHECK(chunks[k].elements == (k < 3 ? 3u : 1u));
        CHECK(chunks[k].payload.size() == chunks[k].elements);
        CHECK(chunks[k].weight == (k == 3 ? 0.375 : 0.0));
        CHECK(chunks[k].edge_seq == 3);
        CHECK(chunks[k].round == 7);
    }
    CHECK(cut(m, 0).size() == 1);   // no chunks
    CHECK(cut(m, 10).size() == 1);  // a share no longer than a chunk leaves whole

    proto::ShareAssembler a(10, true);
    CHECK(a.whole(m));
    CHECK_FALSE(a.whole(chunks[0]));
    // Any order: the last range to come completes the share.
    CHECK_FALSE(a.add(chunks[3]));
    CHECK_FALSE(a.add(chunks[0]));
    CHECK_FALSE(a.add(chunks[2]));
    CHECK(a.partial() == 1);
    const auto whole = a.add(chunks[1]);
    REQUIRE(whole);
    CHECK(a.partial() == 0);
    CHECK(whole->payload == m.payload);  // copied, not added: the same bits
    CHECK(whole->weight == m.weight);
    CHECK(whole->elements == 10);
    CHECK(whole->offset == 0);
    CHECK(whole->sender == 2);
    CHECK(whole->round == 7);
    CHECK(whole->edge_seq == 3);
    CHECK(whole->sent_at == 1.5);

    // A share cut off midway moves nothing; two shares of one sender are kept apart.
    auto other = share_of(10, 0.25);
    other.edge_seq = 4;
    const auto later = cut(other, 4);
    CHECK_FALSE(a.add(chunks[0]));
    CHECK_FALSE(a.add(later[0]));
    CHECK(a.partial() == 2);
    CHECK_FALSE(a.add(later[1]));
    const auto second = a.add(later[2]);
    REQUIRE(second);
    CHECK(second->weight == 0.25);
    CHECK(second->payload == other.payload);
    CHECK(a.partial() == 1);

    // Malformed chunks are errors, not silent mass.
    CHECK_THROWS_AS(a.add(chunks[0]), Error);  // a range that came twice
    auto past = chunks[3];
    past.offset = 9;
    past.elements = 2;
    past.payload.resize(2);
    CHECK_THROWS_AS(a.add(past), Error);  // past the model
    auto short_payload = chunks[1];
    short_payload.edge_seq = 9;
    short_payload.payload.pop_back();
    CHECK_THROWS_AS(a.add(short_payload), Error);  // payload shorter than its range
}

TEST_CASE("chunked shares: a chunked share is one share in flight, for the outbox and drivers") {
    proto::ShareOutbox box;
    const std::uint64_t ids[] = {4, 5, 6};
    box.sent(1, ids);
    auto waiting = share_of(3, 0.5);
    waiting.receiver = 1;
    box.hold(waiting);
    CHECK_FALSE(box.free(1));
    CHECK_FALSE(box.completed(5));
    CHECK_FALSE(box.completed(4));
    CHECK_FALSE(box.free(1));
    const auto next = box.completed(6);  // the last chunk done: the edge is free
    REQUIRE(next);
    CHECK(box.free(1));
    CHECK(next->weight == 0.5);

    // The drivers' bound: chunks of one message (one edge_seq, ascending) count as one.
    proto::EdgeInFlight edges;
    auto m = share_of(3, 0.5);
    m.receiver = 1;
    m.chunk = 0;
    CHECK(edges.sent(m));
    m.chunk = 1;
    CHECK(edges.sent(m));
    CHECK_FALSE(edges.sent(m));  // the same chunk again
    m.chunk = 2;
    m.edge_seq = 4;
    CHECK_FALSE(edges.sent(m));  // another share while one is in flight
    m.receiver = 2;
    CHECK(edges.sent(m));  // another edge
    edges.completed(1);
    edges.completed(1);
    m.receiver = 1;
    m.chunk = 0;
    CHECK(edges.sent(m));  // free again
}

TEST_CASE("chunked shares in sim: a straggler and a slow link, with and without the outbox") {
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    const int n = 8;
    auto cluster = homogeneous_cluster(n, 0.01, 1e-4, 1e8);
    cluster.peers[3].factor = 4;  // a straggler
    const std::size_t floats = optim::build_model(cfg, data.train)->parameter_count();
    const double share_bytes = static_cast<double>(transport::kHeaderBytes + 4 * floats);
    cluster.links[{1, 2}] = LinkSpec{1e-4, share_bytes / 0.05};  // about five steps a share
    for (const std::string algorithm : {"sgp", "async"})
        for (const bool outbox : {false, true}) {
            CAPTURE(algorithm);
            CAPTURE(outbox);
            const std::string box = outbox ? "true" : "false";
            const auto chunked =
                simulate(algorithm, R"({"chunk_bytes": 32, "outbox": )" + box + "}",
                         family("exponential", n), cluster, cfg, data);
            const auto whole = simulate(algorithm, R"({"outbox": )" + box + "}",
                                        family("exponential", n), cluster, cfg, data);
            CHECK(chunked.mass == doctest::Approx(n).epsilon(1e-9));
            CHECK(chunked.mass_lost == doctest::Approx(0).epsilon(1e-9));
            for (const auto& p : chunked.peers) CHECK(p.steps == 1600 / n / 25 * 3);
            CHECK(std::isfinite(chunked.evals.back().loss));
            CHECK(chunked.evals.back().loss < 0.9 * chunked.evals.front().loss);  // it trains
            // sgp: the same training up to the order in which shares were added (the chunks'
            // headers move arrivals a little); async also measures rates from arrival times.
            CHECK(
                chunked.evals.back().loss ==
                doctest::Approx(whole.evals.back().loss).epsilon(algorithm == "sgp" ? 0.01 : 0.1));
            // Three chunks per share: more messages, each with its own header.
            CHECK(chunked.peers[0].messages_sent > whole.peers[0].messages_sent);
            CHECK(chunked.peers[0].bytes_sent > whole.peers[0].bytes_sent);
        }
}

TEST_CASE("chunked shares with inproc peers: a straggler and a slow link, the mass is n to 1e-9") {
    const int n = 4;
    const std::int64_t steps = 30;
    const double step = 0.004;
    for (const char* algorithm : {"sgp", "async"})
        for (const bool outbox : {false, true}) {
            CAPTURE(algorithm);
            CAPTURE(outbox);
            // 64 values in chunks of 20, 20, 20 and 4.
            const json::Node options(
                json::parse_text(std::string(R"({"chunk_bytes": 80, "outbox": )") +
                                     (outbox ? "true" : "false") + "}",
                                 "options.json"));
            auto net = gossamer::testing::make_network(
                family("exponential", n), steps,
                [algorithm](const json::Node* o, proto::PeerContext c) {
                    return proto::make_protocol(algorithm, o, std::move(c));
                },
                &options,
                [](int r) {
                    return std::make_unique<QuadraticWorker>(
                        gossamer::testing::random_vector(64, 300 + static_cast<std::uint64_t>(r)),
                        1.0);
                });
            const double share_bytes = transport::kHeaderBytes + 4 * 64;
            const auto out = peer::run_inproc_peers(net.protocols(), net.locals(), [&](int r) {
                peer::DriverOptions o;
                o.run_timeout = peer::Millis(30'000);
                const double declared = r == 3 ? 4 * step : step;  // rank 3 straggles
                o.declared_step_time = [declared](std::int64_t, double) { return declared; };
                // Rank 0's link to 1 takes ten steps per share.
                if (r == 0)
                    o.link = [share_bytes, step](int to) {
                        return peer::LinkPacing{0, to == 1 ? share_bytes / (10 * step) : 0};
                    };
                return o;
            });
            double mass = 0;
            for (int r = 0; r < n; ++r) {
                const auto& o = out[static_cast<std::size_t>(r)];
                REQUIRE(o.error == "");
                REQUIRE(o.result);
                CHECK(o.result->steps == steps);
                CHECK(o.result->stats.messages_sent > 0);
                const auto& p = *net.peers[static_cast<std::size_t>(r)];
                mass += p.mass();
                CHECK(p.unsent() == 0);
            }
            CHECK(mass == doctest::Approx(n).epsilon(1e-9));
            const bool sgp = std::string(algorithm) == "sgp";
            for (int r = 0; r < n; ++r) {
                const auto i = static_cast<std::size_t>(r);
                // sgp waits for every share; async's are all in once every peer settled.
                CHECK((sgp ? net.at<proto::Sgp>(i).partial_shares()
                           : net.at<proto::AsyncGossip>(i).partial_shares()) == 0);
            }
            if (outbox) {
                const auto& box =
                    sgp ? net.at<proto::Sgp>(0).outbox() : net.at<proto::AsyncGossip>(0).outbox();
                CHECK(box.merged() > 0);  // shares to rank 1 waited for the slow link
            }
        }
}

TEST_CASE("chunked sgp: the unchunked job bit for bit, and sim = inproc peers bit for bit") {
    // Two peers, tau = 0: each absorbs the other's round-t share before step t + 1 and gets no
    // other share meanwhile, so every float is added in the same order whatever the timing (a
    // share absorbed during a step waits in the buffer and is added after the split, as one
    // that comes later). Chunks are assembled by copying, so the model is the unchunked one.
    const auto cfg = logreg_config();
    const auto data = optim::load_training_data(cfg);
    auto cluster = homogeneous_cluster(2, 0.01, 2e-3, 1e7);
    for (auto& p : cluster.peers) p.jitter = {JitterKind::uniform, 0, 0.9};
    const auto topo = family("exponential", 2);
    const auto real = [&](const std::string& options) {
        const json::Node o(json::parse_text(options, "options.json"));
        peer::LocalTraining t;
        t.algorithm = "sgp";
        t.algorithm_options = &o;
        t.topology = topo;
        t.config = &cfg;
        t.train = &data.train;
        t.test = &data.test;
        t.epochs = cfg.epochs;
        t.options = [](int r) {
            peer::DriverOptions d;
            d.run_timeout = peer::Millis(60'000);
            const double pad = 0.001 * (r + 1);  // unequal real step times
            d.declared_step_time = [pad](std::int64_t, double) { return pad; };
            return d;
        };
        const auto res = peer::run_local_training(t);
        for (const auto& p : res.peers) {
            REQUIRE(p.error == "");
            REQUIRE(p.result);
        }
        REQUIRE(res.loss);
        return *res.loss;
    };
    const char* whole = R"({"staleness": 0})";
    const double plain = simulate("sgp", whole, topo, cluster, cfg, data).evals.back().loss;
    for (const char* options : {R"({"staleness": 0, "chunk_bytes": 32})",
                                R"({"staleness": 0, "chunk_bytes": 12, "outbox": true})"}) {
        CAPTURE(options);
        const auto sim = simulate("sgp", options, topo, cluster, cfg, data);
        CHECK(sim.mass == doctest::Approx(2).epsilon(1e-9));
        CHECK(sim.evals.back().loss == plain);  // chunks change the messages, not the values
        CHECK(real(options) == plain);          // real peers: the simulator's model
    }
}

TEST_CASE("chunked shares: bad chunk_bytes values are refused naming the option") {
    const auto expect_refused = [](const char* algorithm, const char* text, const char* what) {
        CAPTURE(algorithm);
        CAPTURE(text);
        const json::Node options(json::parse_text(text, "train.json"));
        try {
            QuadraticWorker worker(std::vector<float>(1000, 0.0f));
            proto::PeerContext ctx{0, 2, family("exponential", 2), &worker, 1};
            (void)proto::make_protocol(algorithm, &options, ctx);
            FAIL("accepted");
        } catch (const ConfigError& e) {
            const std::string msg = e.what();
            CAPTURE(msg);
            CHECK(msg.find("chunk_bytes") != std::string::npos);
            CHECK(msg.find(what) != std::string::npos);
        }
    };
    for (const char* algorithm : {"sgp", "async", "dpsgd", "choco"}) {
        expect_refused(algorithm, R"({"chunk_bytes": "big"})", "auto");
        expect_refused(algorithm, R"({"chunk_bytes": 2})", "4");
        expect_refused(algorithm, R"({"chunk_bytes": -8})", "4");
        expect_refused(algorithm, R"({"chunk_bytes": 1.5})", "integer");
        expect_refused(algorithm, R"({"chunk_bytes": true})", "auto");
    }
    // More than 65,536 chunks per share.
    const json::Node tiny(json::parse_text(R"({"chunk_bytes": 4})", "train.json"));
    QuadraticWorker big(std::vector<float>(70'000, 0.0f));
    for (const char* algorithm : {"sgp", "async"}) {
        CAPTURE(algorithm);
        proto::PeerContext ctx{0, 2, family("exponential", 2), &big, 1};
        CHECK_THROWS_AS((void)proto::make_protocol(algorithm, &tiny, ctx), ConfigError);
    }
}
