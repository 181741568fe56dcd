// The protocols' device paths on a real GPU (the emulated device covers them without one,
// tests/optimizers/protocol/test_device.cpp): an edge whose replicas live on the CUDA device sends
// the host's messages and keeps both ends' replicas identical, and push-sum's vector work on the
// device gives the host's floats. Built by scripts/gpu_check.sh too (no topology, transport or
// Boost).
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "cuda/cuda_device_util.hpp"
#include "gossamer/optimizers/protocol/edge_replica.hpp"
#include "gossamer/optimizers/protocol/push_sum_math.hpp"

using gossamer::test::cuda_device_or_null;
using gossamer::test::get;
using gossamer::test::put;
using gossamer::test::same_bits;
using gossamer::test::test_values;
namespace proto = gossamer::proto;
namespace optim = gossamer::optim;

namespace {

bool same_payload(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The worker push-sum's vector work reads: its size and where its vectors live.
class VectorsOnly final : public proto::LocalWorker {
  public:
    VectorsOnly(std::size_t n, proto::Device* device) : n_(n), device_(device) {}
    std::size_t size() const override { return n_; }
    bool math() const override { return true; }
    std::span<float> params() override { return {}; }  // the test holds x itself
    double compute_gradient(std::span<const float>) override { return 0; }
    std::span<const float> gradient() const override { return {}; }
    void apply_gradient(std::span<float>, std::span<const float>) override {}
    std::int64_t steps() const override { return 0; }
    proto::Device* device() const override { return device_; }

  private:
    std::size_t n_;
    proto::Device* device_;
};

}  // namespace

TEST_CASE("cuda device edges send the host's messages and both ends keep one replica") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    const std::size_t n = 70001;  // not a multiple of 4: the kernels' tails run
    std::vector<std::unique_ptr<optim::Compressor>> codecs;
    codecs.push_back(nullptr);
    for (auto kind : {optim::CompressorKind::fp16, optim::CompressorKind::topk,
                      optim::CompressorKind::randomk, optim::CompressorKind::int8}) {
        optim::CompressorConfig c;
        c.kind = kind;
        c.fraction = 0.05;
        c.block = 128;
        c.seed = 11;
        codecs.push_back(optim::make_compressor(c));
    }
    for (const auto& q : codecs) {
        const bool int8 = q && q->kind() == optim::CompressorKind::int8;
        CAPTURE(q ? std::string(optim::to_string(q->kind())) : std::string("exact"));
        proto::ReplicaSender htx(1, n, true, q.get(), 5), dtx(1, n, true, q.get(), 5, d.get());
        proto::ReplicaReceiver drx(0, n, true, q.get(), 5, d.get());
        proto::DeviceVector dx(*d, n);
        for (int round = 0; round < 4; ++round) {
            CAPTURE(round);
            const auto x = test_values(n, 40 + static_cast<unsigned>(round));
            d->upload(dx.data(), x);
            const auto hm = htx.encode(x, round);
            auto dm = dtx.encode(dx.span(), round);
            // int8's stochastic rounding draws differ on the GPU (docs/operations/gpu.md,
            // Tolerances).
            if (!int8) CHECK(same_payload(hm.payload, dm.payload));
            drx.accept(std::move(dm));
            drx.advance(round);
            const auto sent = get(*d, dtx.replica().data(), n);
            CHECK(same_bits(sent, get(*d, drx.replica().data(), n)));
            const auto host = htx.replica();
            if (!int8) CHECK(same_bits(sent, std::vector<float>(host.begin(), host.end())));
        }
        CHECK(same_payload(dtx.resync().payload, get(*d, dtx.replica().data(), n)));
    }
}

TEST_CASE("cuda push-sum vector work gives the host's floats") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    const std::size_t n = 33333;
    VectorsOnly host_worker(n, nullptr), dev_worker(n, d.get());
    proto::PushSumMath h(host_worker), g(dev_worker);
    auto x = test_values(n, 1);
    auto dx = put(*d, x);
    const auto xs = std::span<float>(x), gx = dx.span();
    const double w = 0.7312;
    h.debias(xs, w);
    g.debias(gx, w);
    CHECK(same_bits(get(*d, g.z().data(), n), std::vector<float>(h.z().begin(), h.z().end())));
    CHECK(same_payload(h.share(xs, 0.3333), g.share(gx, 0.3333)));
    h.keep(xs, 0.41);
    g.keep(gx, 0.41);
    CHECK(same_bits(get(*d, dx.data(), n), x));
    const auto s1 = test_values(n, 2), s2 = test_values(n, 3), s3 = test_values(n, 4);
    h.add(xs, s1);
    g.add(gx, s1);
    h.buffer(s2);
    g.buffer(s2);
    h.buffer(s3);
    g.buffer(s3);
    h.absorb(xs);
    g.absorb(gx);
    CHECK(same_bits(get(*d, dx.data(), n), x));
    h.rescale(xs, 1.9);
    g.rescale(gx, 1.9);
    CHECK(same_bits(get(*d, dx.data(), n), x));
    std::vector<float> hz(n), gz(n);
    h.debias_to_host(xs, 2.5, hz);
    g.debias_to_host(gx, 2.5, gz);
    CHECK(same_bits(gz, hz));
    g.absorb(gx);  // the buffer was zeroed: x stays
    CHECK(same_bits(get(*d, dx.data(), n), x));
}
