// "chunk_bytes": "auto" (docs/algorithms/protocol-contract.md, "chunk_bytes: auto"): chunks sized
// from the link of the cluster file (latency at most 10% of a chunk's time, within [64 KiB, 64
// MiB]; 1 MiB with no cluster), per edge for push-sum and one size for the job for dpsgd and choco,
// in the simulator and for inproc peers started as `gossamer launch` starts them.
#include <doctest/doctest.h>

#include <string>

#include "gossamer/core/cluster.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/share_chunks.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/sim/simulation.hpp"
#include "gossamer/topology/generators.hpp"

using namespace gossamer;

namespace {

std::shared_ptr<const topology::Schedule> ring(int n, topology::WeightRule weights) {
    topology::FamilySpec f;
    f.family = "ring";
    f.n = n;
    f.weights = weights;
    return topology::generate(f);
}

// Messages peer 0 sends in a cost-only simulation of `floats` values.
std::uint64_t messages(const std::string& algorithm, const std::string& options,
                       const Cluster& cluster, std::size_t floats) {
    sim::SimSetup s;
    s.algorithm = algorithm;
    s.options = json::Node(json::parse_text(options, "options.json"));
    const bool push_sum = algorithm == "sgp" || algorithm == "async";
    s.topology = ring(cluster.n(),
                      push_sum ? topology::WeightRule::push_sum : topology::WeightRule::uniform);
    s.cluster = &cluster;
    s.mode = sim::Mode::cost;
    s.model_size = floats;
    s.steps = 4;
    const auto r = sim::simulate(s);
    for (const auto& p : r.peers) CHECK(p.steps == 4);
    if (push_sum) CHECK(r.mass == doctest::Approx(cluster.n()).epsilon(1e-9));
    return r.peers[0].messages_sent;
}

}  // namespace

TEST_CASE("auto chunk sizes: the latency is at most 10% of a chunk's time, within bounds") {
    CHECK(proto::auto_chunk_bytes(nullptr, 0, 1) == 1u << 20);
    // 100 Mbit/s, 2 ms: 9 * 0.002 * 12.5e6 = 225,000 bytes.
    auto c = homogeneous_cluster(4, 0.1, 2e-3, 12.5e6);
    CHECK(proto::auto_chunk_bytes(&c, 0, 1) == 225'000);
    const double chunk_time = 225'000 / 12.5e6;
    CHECK(2e-3 <= doctest::Approx(0.1 * (2e-3 + chunk_time)));
    // The least of the link, the sender's uplink and the receiver's downlink.
    c.peers[2].downlink = 1.25e6;
    CHECK(proto::auto_chunk_bytes(&c, 0, 2) == 65'536);  // 22,500: the 64 KiB floor
    c.peers[2].downlink = 6.25e6;
    CHECK(proto::auto_chunk_bytes(&c, 0, 2) == 112'500);
    c.links[{1, 3}] = LinkSpec{1.0, 1e9};  // a long fat pipe: the 64 MiB cap
    CHECK(proto::auto_chunk_bytes(&c, 1, 3) == 64u << 20);
    c.links[{3, 1}] = LinkSpec{1e-3, 1e6 + 1};  // rounded up to whole floats
    CHECK(proto::auto_chunk_bytes(&c, 3, 1) == 65'536);
    c.links[{3, 1}] = LinkSpec{1e-2, 1e6 + 1};  // 90,000.09 bytes -> 90,004
    CHECK(proto::auto_chunk_bytes(&c, 3, 1) == 90'004);
    // Per edge for push-sum; the largest over the graph's edges for the averaging protocols.
    const proto::ChunkBytes autosize{0, true}, fixed{4096, false};
    CHECK(proto::chunk_bytes_for(fixed, &c, 0, 1) == 4096);
    CHECK(proto::chunk_bytes_for(autosize, &c, 0, 2) == 112'500);
    const auto topo = ring(4, topology::WeightRule::uniform);
    CHECK(proto::job_chunk_bytes(autosize, &c, *topo) == 225'000);  // ring: no 1 -> 3 edge
    CHECK(proto::job_chunk_bytes(autosize, nullptr, *topo) == 1u << 20);
    CHECK(proto::job_chunk_bytes(fixed, &c, *topo) == 4096);
}

TEST_CASE("auto chunk sizes in sim: every algorithm cuts its messages by the cluster's links") {
    // 100 Mbit/s, 2 ms: chunks of 225,000 bytes = 56,250 values; a model of 10^6 values (4 MB)
    // leaves in 18 chunks. Cost-only: the counts, not the values.
    const auto c = homogeneous_cluster(4, 0.5, 2e-3, 12.5e6);
    const std::size_t floats = 1'000'000;
    for (const std::string algorithm : {"sgp", "async", "dpsgd", "choco"}) {
        CAPTURE(algorithm);
        const std::uint64_t whole = messages(algorithm, "{}", c, floats);
        const std::uint64_t chunked = messages(algorithm, R"({"chunk_bytes": "auto"})", c, floats);
        CAPTURE(whole);
        CHECK(chunked > whole);
        if (algorithm != "async")  // async's rate reports and end notices are not cut
            CHECK(chunked == 18 * whole);
        // A fast link with little latency: the 64 KiB floor, 62 chunks.
        const auto fast = homogeneous_cluster(4, 0.5, 1e-6, 1e9);
        if (algorithm == "sgp")
            CHECK(messages(algorithm, R"({"chunk_bytes": "auto"})", fast, floats) == 62 * whole);
    }
    // The outbox and chunks together: one share in flight per edge still holds.
    CHECK(messages("sgp", R"({"chunk_bytes": "auto", "outbox": true})", c, floats) > 0);
    CHECK(messages("async", R"({"chunk_bytes": "auto", "outbox": true})", c, floats) > 0);
}

TEST_CASE("auto chunk sizes for inproc peers: the cluster file given to launch sizes them") {
    // An MLP 10-2000-2 of 26,002 values (104,008 bytes): with a cluster of fast links the
    // 64 KiB floor cuts a share in two; without one (1 MiB) it leaves whole.
    const auto cfg = optim::parse_training_config(json::parse_text(R"({"seed": 1,
        "data": {"name": "logreg_synthetic", "samples": 40, "test_samples": 8, "features": 10, "seed": 2},
        "model": {"name": "mlp", "hidden": [2000]}, "optimizer": {"name": "sgd", "lr": 0.1},
        "training": {"epochs": 1, "batch_size": 10}})",
                                                                   "wide.json"));
    const auto data = optim::load_training_data(cfg);
    const json::Node options(
        json::parse_text(R"({"chunk_bytes": "auto", "staleness": 0})", "options.json"));
    const auto run = [&](std::shared_ptr<const Cluster> cluster) {
        peer::LocalTraining t;
        t.algorithm = "sgp";
        t.algorithm_options = &options;
        t.topology = ring(2, topology::WeightRule::push_sum);
        t.config = &cfg;
        t.train = &data.train;
        t.test = &data.test;
        t.epochs = 1;
        t.cluster = cluster;
        t.options = [](int) {
            peer::DriverOptions o;
            o.run_timeout = peer::Millis(30'000);
            return o;
        };
        const auto res = peer::run_local_training(t);
        std::uint64_t sent = 0;
        for (const auto& p : res.peers) {
            REQUIRE(p.error == "");
            REQUIRE(p.result);
            CHECK(p.result->steps == 2);
            sent += p.result->stats.messages_sent;
        }
        REQUIRE(res.loss);
        return std::pair{sent, *res.loss};
    };
    const auto [whole, whole_loss] = run(nullptr);
    const auto [chunked, chunked_loss] =
        run(std::make_shared<const Cluster>(homogeneous_cluster(2, 0.01, 1e-6, 1e9)));
    CHECK(whole == 4);  // 2 peers x 2 steps, one share each
    CHECK(chunked == 2 * whole);
    CHECK(chunked_loss == whole_loss);  // two peers, tau 0: the same model bit for bit
}
