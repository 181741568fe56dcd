// gossamer::Peer refuses bad input with one line before anything starts (or, for what only the
// job can see, at the start-up handshake), and step() after the last step is an error.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "api_peers.hpp"
#include "support/errors.hpp"

using namespace api_test;
using test::contains;

namespace {

// The ConfigError a one-peer inproc Peer with options `edit`ed from good ones throws.
std::string refused(const test::TempDir& dir, const std::function<void(PeerOptions&)>& edit,
                    std::size_t size = 4) {
    const auto path = topology_file(dir, "ring", 4, topology::WeightRule::uniform);
    PeerOptions o = inproc_options(path, 0, "dpsgd", 10, make_inproc_job(4));
    edit(o);
    std::vector<float> x(size, 0.0f);
    const std::string msg = test::config_error([&] { Peer peer(o, x); });
    CHECK(msg.find('\n') == std::string::npos);
    return msg;
}

}  // namespace

TEST_CASE("Peer: a missing or broken topology file is the loader's one-line ConfigError") {
    test::TempDir dir;
    const auto missing = (dir.path() / "nope.json").string();
    const std::string cli = test::config_error([&] { topology::load_topology(missing); });
    const std::string msg = refused(dir, [&](PeerOptions& o) { o.topology = missing; });
    CHECK(msg == cli);  // what `gossamer topo validate` and `gossamer peer` print
    CHECK(contains(msg, "nope.json"));
    const auto broken = dir.write("broken.json", R"({"version": 1, "peers": {"count": 4}})");
    CHECK(contains(refused(dir, [&](PeerOptions& o) { o.topology = broken; }), "broken.json"));
}

TEST_CASE("Peer: a rank outside the topology or an unknown algorithm or bad options are refused") {
    test::TempDir dir;
    CHECK(contains(refused(dir, [](PeerOptions& o) { o.rank = 4; }), "4"));
    const auto algo = refused(dir, [](PeerOptions& o) { o.algorithm = "gosip"; });
    CHECK(contains(algo, "unknown algorithm \"gosip\""));
    CHECK(contains(algo, "dpsgd"));
    const auto opts =
        refused(dir, [](PeerOptions& o) { o.algorithm_options = R"({"mode": "sideways"})"; });
    CHECK(contains(opts, "PeerOptions::algorithm_options"));
    CHECK(contains(
        refused(dir, [](PeerOptions& o) { o.algorithm_options = std::string(R"({"mode": )"); }),
        "PeerOptions::algorithm_options"));
    CHECK(contains(refused(dir, [](PeerOptions& o) { o.steps = 0; }), "PeerOptions::steps"));
    CHECK(contains(refused(dir, [](PeerOptions& o) { o.step_timeout = {}; }), "step_timeout"));
    CHECK(
        contains(refused(dir, [](PeerOptions& o) { o.inproc = nullptr; }), "PeerOptions::inproc"));
    CHECK(contains(refused(dir, [](PeerOptions& o) { o.inproc = make_inproc_job(3); }),
                   "make_inproc_job(4)"));
    CHECK(contains(refused(
                       dir, [](PeerOptions&) {}, 0),
                   "empty"));
    const auto parts = refused(dir, [](PeerOptions& o) {
        o.partitions = R"({"partitions": {"head": {"gossip_period": 2}}})";
    });
    CHECK(contains(parts, "head"));
}

TEST_CASE("Peer: a trace path that cannot be written or a tiny trace limit is refused at once") {
    test::TempDir dir;
    const auto folder = refused(dir, [&](PeerOptions& o) { o.trace_path = dir.path().string(); });
    CHECK(contains(folder, "PeerOptions::trace_path"));
    CHECK(contains(folder, "is a folder, not a file name"));
    const auto limit = refused(dir, [&](PeerOptions& o) {
        o.trace_path = (dir.path() / "t.json").string();
        o.trace_limit = 100;
    });
    CHECK(contains(limit, "PeerOptions::trace_limit: 100 bytes is too small"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "t.json"));  // nothing left behind
}

TEST_CASE("Peer: partitions that do not cover the parameter vector are refused") {
    test::TempDir dir;
    const auto path = topology_file(dir, "ring", 4, topology::WeightRule::uniform);
    std::vector<float> x(10, 0.0f);
    const PartitionLayout layout({{"body", 0, 6}, {"head", 6, 5}}, 11);
    const auto msg = test::config_error(
        [&] { Peer peer(inproc_options(path, 0, "dpsgd", 10, make_inproc_job(4)), x, layout); });
    CHECK(contains(msg, "cover 11 parameters, the vector has 10"));
}

TEST_CASE("Peer: peers that hand over different parameter counts are refused at the handshake") {
    test::TempDir dir;
    const auto path = topology_file(dir, "ring", 2, topology::WeightRule::uniform);
    auto job = make_inproc_job(2);
    const auto out = run_loops(2, [&](int r, LoopOutcome&) {
        std::vector<float> x(r == 1 ? 11 : 10, 0.0f);
        Peer peer(inproc_options(path, r, "dpsgd", 10, job), x);
    });
    for (const auto& o : out) {
        CAPTURE(o.error);
        CHECK(contains(o.error, "rank 1 hands over 11 parameters, rank 0 hands over 10"));
        CHECK(o.error.find('\n') == std::string::npos);
    }
}

TEST_CASE("Peer: a peer that never joins ends the others' constructor within join_timeout") {
    test::TempDir dir;
    const auto path = topology_file(dir, "ring", 2, topology::WeightRule::uniform);
    auto o = inproc_options(path, 0, "dpsgd", 10, make_inproc_job(2));
    o.join_timeout = std::chrono::milliseconds(300);
    std::vector<float> x(4, 0.0f);
    const auto t0 = Clock::now();
    std::string msg;
    try {
        Peer peer(o, x);
    } catch (const Timeout& e) {
        msg = e.what();
    }
    CHECK(contains(msg, "peers 1 did not join"));
    CHECK(since(t0) < 5.0);
}

TEST_CASE("Peer: step() after the last step throws and finish() returns the final metrics") {
    test::TempDir dir;
    const auto path = topology_file(dir, "ring", 1, topology::WeightRule::uniform);
    std::vector<float> x{1.0f, 2.0f};
    Peer peer(inproc_options(path, 0, "dpsgd", 2, make_inproc_job(1)), x);
    CHECK(peer.steps_left() == 2);
    x[0] -= 0.5f;
    CHECK(peer.step(3.0));
    CHECK(x[0] == doctest::Approx(0.5));
    CHECK_FALSE(peer.step(2.0));
    CHECK_THROWS_WITH_AS(peer.step(1.0), doctest::Contains("after the last step"), Error);
    const auto m = peer.finish();
    CHECK(m.steps == 2);
    CHECK(m.loss == 2.0);
    CHECK(m.finished);
}

TEST_CASE("Peer: without a rank it comes from the launcher's environment") {
    test::TempDir dir;
    if (std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK")) return;  // under mpirun
    setenv("SLURM_PROCID", "5", 1);
    const auto msg = refused(dir, [](PeerOptions& o) { o.rank.reset(); });
    CHECK(contains(msg, "SLURM_PROCID"));
    CHECK(contains(msg, "5"));
    setenv("SLURM_PROCID", "0", 1);
    const auto path = topology_file(dir, "ring", 1, topology::WeightRule::uniform);
    auto o = inproc_options(path, 0, "dpsgd", 1, make_inproc_job(1));
    o.rank.reset();
    std::vector<float> x(3, 1.0f);
    Peer peer(o, x);
    unsetenv("SLURM_PROCID");
    CHECK(peer.rank() == 0);
    CHECK_FALSE(peer.step(0.0));
}

// Issue 16: peers of one in-process job with different options used to start and then hang or
// "succeed" alone; the job refuses them up front, every peer with the same line.
TEST_CASE(
    "Peer: inproc peers with another topology, algorithm, options or partitions are refused") {
    test::TempDir dir;
    const auto ring = topology_file(dir, "ring", 4, topology::WeightRule::uniform);
    const auto complete = topology_file(dir, "complete", 4, topology::WeightRule::uniform);
    const PartitionLayout layout({{"body", 0, 6}, {"head", 6, 4}}, 10);
    struct Case {
        std::function<void(PeerOptions&)> odd;
        std::string says;
    };
    const Case cases[] = {
        {[&](PeerOptions& o) { o.topology = complete; },
         "PeerOptions: topology graph differs: rank 2 has complete (n = 4) in complete.json, rank "
         "0 has ring (n = 4) in ring.json; give every peer the same PeerOptions::topology file "
         "(also differ: topology weights)"},
        {[](PeerOptions& o) { o.algorithm = "async"; },
         "PeerOptions: algorithm differs: rank 2 has async, rank 0 has dpsgd; give every peer "
         "the same PeerOptions::algorithm"},
        {[](PeerOptions& o) { o.algorithm_options = R"({"mode": "cta"})"; },
         R"(PeerOptions: algorithm options differ: rank 2 has dpsgd with {"mode":"cta"}, rank 0 )"
         "has dpsgd with the defaults; give every peer the same PeerOptions::algorithm_options"},
        {[](PeerOptions& o) { o.partitions = R"({"partitions": {"head": {"gossip_period": 2}}})"; },
         "PeerOptions: partitions differ: rank 2 has head (period 1, gossip period 2), rank 0 "
         "has every partition every step; give every peer the same PeerOptions::partitions"},
        {[](PeerOptions& o) { o.exact_average = true; },
         "PeerOptions: final average differs: rank 2 has the exact average, rank 0 has no exact "
         "average; give every peer the same PeerOptions::exact_average"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.says);
        auto job = make_inproc_job(4);
        const auto t0 = Clock::now();
        const auto out = run_loops(4, [&](int r, LoopOutcome&) {
            auto o = inproc_options(ring, r, "dpsgd", 10, job);
            o.stall_timeout = std::chrono::milliseconds(3000);
            o.run_timeout = std::chrono::milliseconds(8000);
            if (r == 2) c.odd(o);
            std::vector<float> x(10, 0.0f);
            Peer peer(o, x, layout);
            while (peer.step(0.0)) {
            }
            peer.finish();
        });
        for (const auto& o : out) CHECK(o.error == c.says);
        CHECK(since(t0) < 5.0);
    }
}
