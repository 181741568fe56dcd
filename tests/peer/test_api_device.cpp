// gossamer::Peer with its parameters on a device (PeerOptions::device, docs/operations/gpu.md).
// Without a GPU the emulated device stands in: its memory is unreachable from the host outside its
// own calls, so a device path that reads parameters on the host crashes here. dpsgd on it must end
// with exactly the parameters of the host path, with partitions and a compressor too.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string>

#include "api_peers.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/device.hpp"

using namespace api_test;

namespace {

constexpr std::size_t kSize = 40;

// Each peer pulls its parameters towards its own target: loss 0.5 |P - b_r|^2.
std::vector<float> target(int rank) {
    std::vector<float> b(kSize);
    for (std::size_t k = 0; k < kSize; ++k)
        b[k] = static_cast<float>((k * 7 + static_cast<std::size_t>(rank) * 13) % 17) - 8.0f;
    return b;
}

// One SGD step on the host copy h of P; returns the loss.
double sgd_step(std::vector<float>& h, const std::vector<float>& b) {
    double loss = 0;
    for (std::size_t k = 0; k < h.size(); ++k) {
        const float g = h[k] - b[k];
        loss += 0.5 * g * g;
        h[k] -= 0.1f * g;
    }
    return loss;
}

// n peers of `algorithm` on a ring; P on `device` ("cpu" or "emulated"). Returns the final
// params.
std::vector<LoopOutcome> train(const std::string& device, const std::string& partitions,
                               const char* algorithm = "dpsgd", const std::string& options = "") {
    test::TempDir dir;
    const int n = 3;  // the all-reduce divides by 3: not a power of two
    const auto path = topology_file(dir, "ring", n, topology::WeightRule::uniform);
    auto job = make_inproc_job(n);
    const PartitionLayout layout({{"body", 0, 24}, {"head", 24, kSize - 24}}, kSize);
    return run_loops(n, [&](int r, LoopOutcome& me) {
        auto o = inproc_options(path, r, algorithm, 25, job);
        o.algorithm_options = options;
        o.device = device;
        o.partitions = partitions;
        const auto b = target(r);
        std::vector<float> h(kSize, 1.0f);  // the user's host copy
        if (device == "cpu") {
            Peer peer(o, h, layout);
            while (peer.step(sgd_step(h, b))) {
            }
            me.metrics = peer.finish();
            me.params = h;
            return;
        }
        auto dev = proto::emulated_device();
        proto::DeviceVector p(*dev, kSize);
        dev->upload(p.data(), h);
        Peer peer(o, p.span(), layout);
        double loss = 0;
        do {
            dev->download(h, p.data());  // "the forward and backward pass on the GPU"
            loss = sgd_step(h, b);
            dev->upload(p.data(), h);
        } while (peer.step(loss));
        me.metrics = peer.finish();
        dev->download(h, p.data());
        me.params = h;
    });
}

void check_same(const std::vector<LoopOutcome>& host, const std::vector<LoopOutcome>& dev) {
    for (std::size_t r = 0; r < host.size(); ++r) {
        CAPTURE(r);
        REQUIRE(host[r].error == "");
        REQUIRE(dev[r].error == "");
        REQUIRE(host[r].params.size() == dev[r].params.size());
        CHECK(std::memcmp(host[r].params.data(), dev[r].params.data(), kSize * 4) == 0);
        CHECK(host[r].metrics.bytes_sent == dev[r].metrics.bytes_sent);
        CHECK(dev[r].metrics.rounds == host[r].metrics.rounds);
        CHECK(dev[r].metrics.rounds >= 9);
    }
    // The peers moved towards each other's targets: not still at the start.
    CHECK(dev[0].params != std::vector<float>(kSize, 1.0f));
}

}  // namespace

TEST_CASE("dpsgd with parameters on the emulated device ends bit-identical to the host path") {
    check_same(train("cpu", ""), train("emulated", ""));
}

TEST_CASE("device dpsgd with partitions at two periods and an fp16 head matches the host") {
    const std::string parts =
        R"({"partitions": {"head": {"gossip_period": 2, "compressor": {"name": "fp16"}}}})";
    check_same(train("cpu", parts), train("emulated", parts));
}

TEST_CASE("allreduce on the emulated device averages exactly as on the host") {
    // Gradient averaging in 3 chunks per segment, and model averaging every 3 steps (the
    // device divides, then copies the average into x).
    check_same(train("cpu", "", "allreduce", R"({"chunks": 3})"),
               train("emulated", "", "allreduce", R"({"chunks": 3})"));
    check_same(train("cpu", "", "allreduce", R"({"period": 3})"),
               train("emulated", "", "allreduce", R"({"period": 3})"));
}

TEST_CASE("choco on the emulated device ends bit-identical to the host path") {
    for (const char* replicas : {"shared", "per_edge"}) {
        CAPTURE(replicas);
        const std::string options = fmt::format(
            R"({{"compressor": {{"name": "topk", "fraction": 0.3}}, "replicas": "{}"}})", replicas);
        check_same(train("cpu", "", "choco", options), train("emulated", "", "choco", options));
    }
}

TEST_CASE("sgp and async train on the emulated device through gossamer::Peer") {
    // Their threads interleave differently in every run (tests/optimizers/protocol/test_device.cpp
    // compares them bit for bit under a deterministic driver); here: the device path runs end to
    // end without a host access of device memory, and every peer finishes every step.
    for (const char* algorithm : {"sgp", "async"}) {
        CAPTURE(algorithm);
        for (const auto& peer : train("emulated", "", algorithm)) {
            REQUIRE(peer.error == "");
            CHECK(peer.metrics.rounds == 25);
            CHECK(peer.metrics.steps == 25);
            for (float v : peer.params) CHECK(std::isfinite(v));
        }
    }
}

TEST_CASE("a bad PeerOptions device is one ConfigError line naming the field") {
    test::TempDir dir;
    const auto path = topology_file(dir, "ring", 2, topology::WeightRule::uniform);
    std::vector<float> p(8, 0.0f);
    auto o = inproc_options(path, 0, "dpsgd", 5, make_inproc_job(2));
    o.device = "gpu0";
    CHECK_THROWS_WITH_AS(Peer(o, p), doctest::Contains("PeerOptions::device: unknown device"),
                         ConfigError);
    o.device = "cuda";  // no GPU here (or no CUDA in this build)
    try {
        Peer peer(o, p);
        FAIL("device cuda started without a GPU");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        CHECK(what.find("PeerOptions::device") != std::string::npos);
        CHECK(what.find('\n') == std::string::npos);
        CHECK((what.find("no CUDA") != std::string::npos ||
               what.find("no CUDA support") != std::string::npos));
    }
}
