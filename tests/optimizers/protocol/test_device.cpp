// The emulated device (gossamer/optimizers/device.hpp): its memory is unreachable from the host
// outside its own calls, its calls compute exactly what the CPU path does, and an edge whose
// replicas live on it sends the same messages as a host edge.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "gossamer/core/mixing.hpp"
#include "gossamer/optimizers/protocol/channels.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/edge_replica.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"
#include "gossamer/optimizers/protocols/sgp/sgp.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer;
using proto::Device;
using proto::DeviceVector;

namespace {

std::vector<float> randoms(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

DeviceVector on_device(Device& d, const std::vector<float>& v) {
    DeviceVector out(d, v.size());
    d.upload(out.data(), v);
    return out;
}

std::vector<float> on_host(Device& d, const float* p, std::size_t n) {
    std::vector<float> out(n);
    d.download(out, p);
    return out;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Whether reading p in a child process kills it with SIGSEGV.
bool read_faults(const float* p) {
    const pid_t pid = fork();
    if (pid == 0) {
        std::signal(SIGSEGV, SIG_DFL);  // not the test framework's crash report
        volatile float v = *p;
        (void)v;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

}  // namespace

TEST_CASE("emulated device memory cannot be read on the host outside a device call") {
    auto d = proto::emulated_device();
    DeviceVector v = on_device(*d, {1, 2, 3});
    CHECK(read_faults(v.data()));
    CHECK(on_host(*d, v.data(), 3) == std::vector<float>{1, 2, 3});
    CHECK(read_faults(v.data() + 2));  // protected again after the call
    std::vector<float> host{4, 5, 6};
    CHECK_FALSE(read_faults(host.data()));
}

TEST_CASE("emulated device calls compute what the CPU path computes, on sub-ranges too") {
    auto d = proto::emulated_device();
    const std::size_t n = 1000, off = 3, m = n - 7;  // an unaligned partition
    const auto x = randoms(n, 1), a = randoms(n, 2), b = randoms(n, 3);
    DeviceVector dx = on_device(*d, x), da = on_device(*d, a), db = on_device(*d, b);

    std::vector<float> cx = x;
    const std::vector<MixTerm> terms{{std::span(a).subspan(off, m), 0.25f},
                                     {std::span(b).subspan(off, m), 0.5f}};
    gossamer::mix(std::span(cx).subspan(off, m), 0.25f, terms);
    const std::vector<proto::DeviceTerm> dterms{{da.data() + off, 0.25}, {db.data() + off, 0.5}};
    d->mix(dx.data() + off, 0.25, dterms, m);
    CHECK(on_host(*d, dx.data(), n) == cx);

    DeviceVector dd(*d, n);
    d->delta(dd.data(), da.data(), db.data(), n);
    d->axpy(dd.data(), -0.5f, dx.data(), n);
    d->upload_add(dd.data(), b);
    std::vector<float> cd(n);
    for (std::size_t k = 0; k < n; ++k) {
        cd[k] = a[k] - b[k];
        cd[k] += -0.5f * cx[k];
        cd[k] += b[k];
    }
    CHECK(on_host(*d, dd.data(), n) == cd);

    DeviceVector dc(*d, n);
    d->copy(dc.data(), dd.data(), n);
    CHECK(on_host(*d, dc.data(), n) == cd);

    for (const char* codec : {"fp16", "topk"}) {
        CAPTURE(codec);
        optim::CompressorConfig cfg;
        cfg.kind = std::string(codec) == "fp16" ? optim::CompressorKind::fp16
                                                : optim::CompressorKind::topk;
        cfg.fraction = 0.1;
        const auto q = optim::make_compressor(cfg);
        const optim::CodecKey key{0, 7, 3};
        std::vector<std::byte> cpu(q->encoded_bytes(n)), dev(cpu.size());
        q->encode(a, key, cpu);
        d->encode(*q, da.data(), n, key, dev);
        CHECK(cpu == dev);
        std::vector<float> cy = b;
        q->decode_add(cpu, key, cy);
        d->decode_add(*q, dev, key, db.data(), n);
        CHECK(on_host(*d, db.data(), n) == cy);
        d->upload(db.data(), b);
    }
}

TEST_CASE("an edge with device replicas sends what a host edge sends, compressed or not") {
    auto d = proto::emulated_device();
    const std::size_t n = 300;
    optim::CompressorConfig cfg;
    cfg.kind = optim::CompressorKind::int8;
    cfg.block = 64;
    const auto q8 = optim::make_compressor(cfg);
    const std::vector<const optim::Compressor*> codecs{nullptr, q8.get()};
    for (const optim::Compressor* q : codecs) {
        CAPTURE(q != nullptr);
        proto::ReplicaSender htx(1, n, true, q, 9), dtx(1, n, true, q, 9, d.get());
        proto::ReplicaReceiver hrx(0, n, true, q, 9), drx(0, n, true, q, 9, d.get());
        DeviceVector dx(*d, n);
        for (int round = 0; round < 4; ++round) {
            const auto x = randoms(n, 10 + static_cast<unsigned>(round));
            d->upload(dx.data(), x);
            auto hm = htx.encode(x, round);
            auto dm = dtx.encode(dx.span(), round);
            CHECK(hm.kind == dm.kind);
            CAPTURE(round);
            CHECK(same_bytes(hm.payload, dm.payload));  // int8 codes may read as NaN floats
            hrx.accept(std::move(hm));
            drx.accept(std::move(dm));
            hrx.advance(round);
            drx.advance(round);
            const auto replica = hrx.replica();
            CHECK(on_host(*d, drx.replica().data(), n) ==
                  std::vector<float>(replica.begin(), replica.end()));
            CHECK(on_host(*d, dtx.replica().data(), n) ==
                  std::vector<float>(replica.begin(), replica.end()));
        }
        CHECK(same_bytes(dtx.resync().payload, htx.resync().payload));
    }
}

namespace {

// QuadraticWorker (network.hpp) with x and g on the emulated device: the gradient is computed on
// the host from a downloaded point, and x -= lr g runs as device calls with the host's roundings
// (lr g rounded to float, then one subtraction).
class DeviceQuadraticWorker final : public proto::LocalWorker {
  public:
    DeviceQuadraticWorker(std::shared_ptr<Device> d, std::vector<float> x0, double a,
                          std::vector<float> b)
        : d_(std::move(d)),
          host_(x0, a, std::move(b)),
          x_(on_device(*d_, x0)),
          g_(*d_, x0.size()),
          tmp_(*d_, x0.size()) {}
    std::size_t size() const override { return x_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return x_.span(); }
    double compute_gradient(std::span<const float> at) override {
        std::vector<float> h(at.size());
        d_->download(h, at.data());
        const double loss = host_.compute_gradient(h);
        d_->upload(g_.data(), host_.gradient());
        return loss;
    }
    std::span<const float> gradient() const override { return g_.span(); }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        d_->scale(tmp_.data(), 0.1, g.data(), x.size());  // QuadraticWorker's lr
        d_->axpy(x.data(), -1.0f, tmp_.data(), x.size());
        ++steps_;
    }
    std::int64_t steps() const override { return steps_; }
    Device* device() const override { return d_.get(); }

  private:
    std::shared_ptr<Device> d_;
    gossamer::testing::QuadraticWorker host_;  // the gradient's math
    DeviceVector x_, g_, tmp_;
    std::int64_t steps_ = 0;
};

// The models n peers of `factory` report after a deterministic run (harness.hpp: virtual time,
// seeded step and message jitter), with workers on the host or on the emulated device.
std::vector<std::vector<double>> harness_run(const gossamer::testing::Factory& factory,
                                             const char* options, bool device) {
    const int n = 5;
    topology::FamilySpec spec;
    spec.family = "ring";  // uniform weights: doubly stochastic, as sgp needs
    spec.n = n;
    const auto schedule = topology::generate(spec);
    json::Document doc = json::parse_text(options, "options.json");
    json::Node node(doc);
    auto net = gossamer::testing::make_network(
        schedule, 12, factory, &node, [&](int i) -> std::unique_ptr<proto::LocalWorker> {
            auto x0 = gossamer::testing::random_vector(33, 40 + static_cast<unsigned>(i));
            auto b = gossamer::testing::random_vector(33, 90 + static_cast<unsigned>(i));
            if (device)
                return std::make_unique<DeviceQuadraticWorker>(proto::emulated_device(), x0, 1.0,
                                                               b);
            return std::make_unique<gossamer::testing::QuadraticWorker>(x0, 1.0, b);
        });
    gossamer::testing::HarnessOptions o = gossamer::testing::seconds_clock();
    o.step_jitter = 0.7;  // uneven steps: shares arrive during steps and between them
    o.delay_jitter = 0.3;
    auto h = net.harness(o);
    REQUIRE(h.run());
    return net.models();
}

}  // namespace

TEST_CASE("every protocol with device workers report the host's models bit for bit") {
    struct Case {
        const char* name;
        gossamer::testing::Factory factory;
        const char* options;
    };
    const Case cases[] = {
        {"sgp", proto::make_sgp, R"({"staleness": 1})"},
        {"async numerator", proto::make_async, R"({"step": "numerator", "seed": 5})"},
        {"async debiased", proto::make_async, R"({"step": "debiased", "seed": 5})"},
        {"dpsgd", proto::make_dpsgd, R"({"mode": "atc"})"},
        {"allreduce", proto::make_allreduce, R"({"chunks": 2})"},
        {"choco shared", proto::make_choco,
         R"({"compressor": {"name": "int8", "block": 8}, "replicas": "shared"})"},
        {"choco per edge", proto::make_choco,
         R"({"compressor": {"name": "randomk", "fraction": 0.4}, "replicas": "per_edge"})"},
    };
    for (const Case& c : cases) {
        const std::string name = c.name;
        CAPTURE(name);
        const auto host = harness_run(c.factory, c.options, false);
        const auto dev = harness_run(c.factory, c.options, true);
        CHECK(host == dev);
        CHECK(host[0] != host[1]);  // the run did something per peer
    }
}

TEST_CASE("choco refuses int4 on a device by its JSON path before it runs, the host runs it") {
    // int4 has no device kernels (optimizers/cuda): the refusal comes from choco's constructor,
    // so that no job starts with a codec its device cannot run.
    const std::pair<const char*, const char*> cases[] = {
        {R"({"compressor": {"name": "int4"}})", "choco.compressor"},
        {R"({"compressor": {"name": "int8"}, "replicas": "per_edge",
             "edge_compression": [{"below": 1e8, "compressor": {"name": "fp16"}},
                                  {"below": 1e6, "compressor": {"name": "int4"}}]})",
         "choco.edge_compression[1].compressor"},
    };
    for (const auto& [options, path] : cases) {
        CAPTURE(options);
        try {
            harness_run(proto::make_choco, options, true);
            FAIL("no ConfigError");
        } catch (const ConfigError& e) {
            CHECK(e.path() == path);
            CHECK(std::string(e.what()).find("int4 has no device codec") != std::string::npos);
        }
    }
    const auto host = harness_run(proto::make_choco, cases[0].first, false);
    CHECK(host[0] != host[1]);
}

TEST_CASE("a partition's int4 compressor on a device is refused by its JSON path") {
    // partition_channels() builds every protocol's channels (dpsgd, choco): it refuses a codec
    // the device cannot run before a step is taken.
    struct RatedOnDevice final : proto::LocalWorker {
        std::shared_ptr<Device> dev = proto::emulated_device();
        optim::Multirate rates;
        std::size_t size() const override { return 6; }
        bool math() const override { return true; }
        std::span<float> params() override { return {}; }
        double compute_gradient(std::span<const float>) override { return 0; }
        std::span<const float> gradient() const override { return {}; }
        void apply_gradient(std::span<float>, std::span<const float>) override {}
        std::int64_t steps() const override { return 0; }
        Device* device() const override { return dev.get(); }
        const optim::Multirate* multirate() const override { return &rates; }
    };
    RatedOnDevice w;
    optim::PartitionRate slow;
    slow.compressor = optim::CompressorConfig{.kind = optim::CompressorKind::int4, .block = 64};
    const PartitionLayout layout({{"fast", 0, 2}, {"slow", 2, 4}}, 6);
    w.rates = optim::Multirate(layout, {{}, slow}, optim::BackwardMode::skip);
    try {
        proto::partition_channels(w, 0);
        FAIL("no ConfigError");
    } catch (const ConfigError& e) {
        CHECK(e.path() == "partitions.slow.compressor");
    }
    slow.compressor->kind = optim::CompressorKind::int8;
    w.rates = optim::Multirate(layout, {{}, slow}, optim::BackwardMode::skip);
    CHECK(proto::partition_channels(w, 0).size() == 2);
}
