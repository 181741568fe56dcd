// qallreduce: identical models, exact bytes, error feedback that loses nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "gossamer/optimizers/protocols/qallreduce/qallreduce.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
namespace topo = gossamer::topology;
namespace json = gossamer::json;
namespace proto = gossamer::proto;

namespace {

std::shared_ptr<const topo::Schedule> ring(int n) {
    topo::FamilySpec f;
    f.family = "ring";
    f.n = n;
    return topo::generate(f);
}

// n peers with f_r(x) = 1/2 |x - b_r|^2 from one start: the average gradient is x - mean(b).
Network quadratic(int n, std::size_t d, std::int64_t steps, const Factory& factory,
                  const json::Node* options) {
    return make_network(ring(n), steps, factory, options, [&](int r) {
        return std::make_unique<QuadraticWorker>(std::vector<float>(d, 0.0f), 1.0,
                                                 random_vector(d, 50 + r), 0.2);
    });
}

}  // namespace

TEST_CASE("qallreduce keeps every model identical and sends the exact encoded bytes") {
    for (const char* c : {R"({"name": "fp16"})", R"({"name": "int8", "block": 64})",
                          R"({"name": "topk", "fraction": 0.1})",
                          R"({"name": "randomk", "fraction": 0.2, "seed": 3})"}) {
        for (int n : {1, 2, 3, 5}) {
            CAPTURE(std::string(c));
            CAPTURE(n);
            const std::size_t d = 1000;
            const std::string text = std::string(R"({"compressor": )") + c + "}";
            json::Document doc = json::parse_text(text, "q.json");
            json::Node node(doc);
            Network net = quadratic(n, d, 7, proto::make_qallreduce, &node);
            HarnessOptions o = seconds_clock();
            o.step_jitter = 0.3;
            o.delay_jitter = 0.3;
            auto h = net.harness(o);
            REQUIRE(h.run());
            const auto models = net.models();
            for (const auto& m : models) CHECK(m == models[0]);
            // Exact bytes: each message is a header plus the encoded words of its segment.
            json::Document cdoc = json::parse_text(c, "c.json");
            const auto q = gossamer::optim::make_compressor(
                gossamer::optim::parse_compressor_config(json::Node(cdoc)));
            std::uint64_t want = 0;
            for (int s = 0; s < n && n > 1; ++s) {
                const std::size_t len = d / n + (static_cast<std::size_t>(s) < d % n ? 1 : 0);
                want += 2 * (n - 1) * (proto::Message{}.wire_bytes() + 4 * q->encoded_words(len));
            }
            std::uint64_t sent = 0;
            for (const auto& p : net.peers) sent += p->stats().bytes_sent;
            CHECK(sent == 7 * want);
        }
    }
}

namespace {

// f_r(x) = c_r . x: the same gradient c_r every step, x <- x - lr g.
class LinearWorker final : public LocalWorker {
  public:
    LinearWorker(std::size_t d, std::vector<float> c) : x_(d, 0.0f), c_(std::move(c)) {}
    std::size_t size() const override { return x_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return x_; }
    double compute_gradient(std::span<const float>) override { return 0.0; }
    std::span<const float> gradient() const override { return c_; }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        for (std::size_t k = 0; k < x.size(); ++k) x[k] -= 0.01f * g[k];
        ++steps_;
    }
    std::int64_t steps() const override { return steps_; }

  private:
    std::vector<float> x_, c_;
    std::int64_t steps_ = 0;
};

}  // namespace

TEST_CASE("qallreduce with error feedback loses no gradient, without it loses some") {
    // Constant gradients c_r: after T steps plain SGD on the average is at -lr T mean(c). With
    // error feedback x misses only what the peers still hold in their errors (sum e / n);
    // without it top-k 10% keeps moving the same few coordinates and the rest never move.
    const int n = 4, steps = 300;
    const std::size_t d = 200;
    auto run = [&](bool feedback, double& held) {
        const std::string text =
            std::string(R"({"compressor": {"name": "topk", "fraction": 0.1}, "error_feedback": )") +
            (feedback ? "true" : "false") + "}";
        json::Document doc = json::parse_text(text, "q.json");
        json::Node node(doc);
        Network net = make_network(ring(n), steps, proto::make_qallreduce, &node, [&](int r) {
            return std::make_unique<LinearWorker>(d, random_vector(d, 70 + r));
        });
        REQUIRE(net.harness().run());
        std::vector<double> want(d, 0.0), err(d, 0.0);
        for (int r = 0; r < n; ++r) {
            const auto c = random_vector(d, 70 + r);
            const auto e = net.at<proto::Qallreduce>(r).error();
            for (std::size_t k = 0; k < d; ++k) {
                want[k] -= 0.01 * steps * c[k] / n;
                err[k] += e[k] / n;
            }
        }
        const auto x = net.models()[0];
        double miss = 0, h = 0;
        for (std::size_t k = 0; k < d; ++k) {
            miss = std::max(miss, std::abs(x[k] - (want[k] + 0.01 * err[k])));
            h = std::max(h, std::abs(want[k]));
        }
        held = h;
        return miss;
    };
    double scale = 0;
    const double with = run(true, scale), without = run(false, scale);
    CAPTURE(with);
    CAPTURE(without);
    CAPTURE(scale);
    CHECK(with < 1e-3 * scale);    // only float rounding: nothing was lost
    CHECK(without > 0.1 * scale);  // most coordinates are far from where SGD would be
}

TEST_CASE("qallreduce int8 moves about 4x fewer bytes than allreduce, fp16 2x") {
    const int n = 8;
    const std::size_t d = 100'000;
    auto bytes = [&](const Factory& f, const char* options) {
        json::Document doc = json::parse_text(options, "q.json");
        json::Node node(doc);
        Network net = quadratic(n, d, 2, f, &node);
        REQUIRE(net.harness().run());
        return static_cast<double>(net.peers[0]->stats().bytes_sent);
    };
    const double fp32 = bytes(proto::make_allreduce, "{}");
    const double int8 = bytes(proto::make_qallreduce, R"({"compressor": {"name": "int8"}})");
    const double fp16 = bytes(proto::make_qallreduce, R"({"compressor": {"name": "fp16"}})");
    MESSAGE("bytes per peer and step: fp32 " << fp32 / 2 << ", int8 " << int8 / 2 << " ("
                                             << fp32 / int8 << "x), fp16 " << fp16 / 2);
    CHECK(fp32 / int8 > 3.8);
    CHECK(fp32 / int8 < 4.0);
    CHECK(fp32 / fp16 > 1.95);
}

TEST_CASE("qallreduce: bad options are refused with the option's path") {
    QuadraticWorker w({0.0f});
    for (const char* bad :
         {R"({"compressor": {"name": "int2"}})", R"({"compressor": {"name": "int4", "block": 0}})",
          R"({"compresor": {}})", R"({"error_feedback": 1})",
          R"({"compressor": {"name": "topk", "fraction": 2}})"}) {
        CAPTURE(std::string(bad));
        json::Document doc = json::parse_text(bad, "q.json");
        json::Node node(doc);
        CHECK_THROWS_AS(proto::make_qallreduce(&node, {0, 4, ring(4), &w, 1}),
                        gossamer::ConfigError);
    }
}

TEST_CASE("lsgd, gadmm and qallreduce refuse parameters on a device with one line") {
    struct OnDevice final : LocalWorker {
        std::shared_ptr<proto::Device> dev = proto::emulated_device();
        std::size_t size() const override { return 1; }
        bool math() const override { return true; }
        std::span<float> params() override { return {}; }
        double compute_gradient(std::span<const float>) override { return 0; }
        std::span<const float> gradient() const override { return {}; }
        void apply_gradient(std::span<float>, std::span<const float>) override {}
        std::int64_t steps() const override { return 0; }
        proto::Device* device() const override { return dev.get(); }
    } w;
    for (const char* name : {"lsgd", "gadmm", "qallreduce"}) {
        CAPTURE(std::string(name));
        try {
            proto::make_protocol(name, nullptr, {0, 4, ring(4), &w, 1});
            FAIL("accepted a worker on a device");
        } catch (const gossamer::ConfigError& e) {
            CHECK(std::string(e.what()).find("keeps its vectors in host memory") !=
                  std::string::npos);
        }
    }
}
