// Multirate partitions: the local rule (period k, step k * lr, masked backward that really skips
// work) and dpsgd's per-partition gossip (own round counter, own period, own compressor).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "gossamer/core/blas.hpp"
#include "gossamer/core/models.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/core/synthetic.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/protocols/choco/choco.hpp"
#include "gossamer/optimizers/protocols/dpsgd/dpsgd.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
namespace optim = gossamer::optim;
namespace topo = gossamer::topology;
using gossamer::LayerMask;
using gossamer::PartitionLayout;
using gossamer::proto::Dpsgd;

namespace {

// fast = the output layer, slow = the layers below, with the slow partition's rates.
optim::Multirate fast_slow(const gossamer::Model& model, optim::PartitionRate slow) {
    const auto layers = model.layers();
    const auto& last = layers.back();
    PartitionLayout layout({{"slow", 0, last.offset}, {"fast", last.offset, last.size}},
                           model.parameter_count());
    return optim::Multirate(layout, {slow, {}}, optim::BackwardMode::skip);
}

}  // namespace

TEST_CASE("multirate: a slow partition changes only on its steps, by k * lr * g") {
    const auto set = gossamer::make_logistic_regression(400, 12, 3);
    auto model = gossamer::models::mlp(12, {16}, 2);
    optim::OptimizerConfig sgd;  // plain SGD: the update is exactly -rate * g
    sgd.lr = 0.1;
    optim::PartitionRate slow;
    slow.period = 3;
    auto rates = fast_slow(*model, slow);
    const auto layout = rates.layout();
    optim::LocalTrainer t(std::move(model), layout, sgd, optim::LrSchedule({}, sgd.lr), set.data,
                          20, 7);
    t.set_multirate(rates);
    const auto& sp = layout[0];
    const auto& fp = layout[1];
    for (std::int64_t s = 0; s < 9; ++s) {
        CAPTURE(s);
        const std::vector<float> before(t.params().begin(), t.params().end());
        const auto slow_macs = t.work()[0].backward_macs, fast_macs = t.work()[1].backward_macs;
        t.compute_gradient(t.params());
        // The slow layers' backward work is done on their steps only; the fast layer's always.
        CHECK((t.work()[0].backward_macs > slow_macs) == ((s + 1) % 3 == 0));
        CHECK(t.work()[1].backward_macs > fast_macs);
        const std::vector<float> g(t.gradient().begin(), t.gradient().end());
        t.apply_gradient(t.params(), t.gradient());
        const auto x = t.params();
        const bool due = (s + 1) % 3 == 0;
        bool slow_changed = false;
        for (std::size_t k = sp.offset; k < sp.end(); ++k) {
            slow_changed = slow_changed || x[k] != before[k];
            if (due) REQUIRE(x[k] == doctest::Approx(before[k] - 3 * 0.1 * g[k]).epsilon(1e-6));
        }
        CHECK(slow_changed == due);
        bool fast_changed = false;
        for (std::size_t k = fp.offset; k < fp.end(); ++k) fast_changed |= x[k] != before[k];
        CHECK(fast_changed);
    }
    CHECK(t.work()[0].updates == 3);
    CHECK(t.work()[1].updates == 9);
}

TEST_CASE("multirate: skipping the backward pass changes no value, only the work done") {
    const auto set = gossamer::make_logistic_regression(400, 12, 3);
    optim::OptimizerConfig sgd;
    sgd.lr = 0.1;
    sgd.momentum = 0.9;
    sgd.nesterov = true;
    auto trainer = [&](optim::BackwardMode mode) {
        auto model = gossamer::models::mlp(12, {16, 8}, 2);
        optim::PartitionRate slow;
        slow.period = 4;
        auto r = fast_slow(*model, slow);
        optim::Multirate rates(r.layout(), {r.rate(0), r.rate(1)}, mode);
        auto t = std::make_unique<optim::LocalTrainer>(
            std::move(model), r.layout(), sgd, optim::LrSchedule({}, sgd.lr), set.data, 20, 7);
        t->set_multirate(rates);
        return t;
    };
    auto skip = trainer(optim::BackwardMode::skip);
    auto full = trainer(optim::BackwardMode::full);
    for (int s = 0; s < 12; ++s) {
        skip->step();
        full->step();
    }
    const auto a = skip->params(), b = full->params();
    CHECK(std::equal(a.begin(), a.end(), b.begin()));
    CHECK(skip->work()[0].updates == 3);
    CHECK(full->work()[0].updates == 3);
    CHECK(skip->work()[0].backward_macs * 4 == full->work()[0].backward_macs);
}

TEST_CASE("multirate: the masked backward skips real work and gives the same fast gradient") {
    const int features = 784, hidden = 512, classes = 10, batch = 64;
    auto model = gossamer::models::mlp(features, {hidden}, classes);
    std::vector<float> params(model->parameter_count());
    model->init(params, 1);
    gossamer::Rng rng(2);
    std::vector<float> x(static_cast<std::size_t>(batch) * features);
    std::vector<std::int32_t> labels(batch);
    for (auto& v : x) v = static_cast<float>(rng.uniform());
    for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(classes));
    gossamer::Batch b;
    b.x = x.data();
    b.labels = labels.data();
    b.size = batch;
    b.features = features;
    const auto& fc2 = model->layers()[1];

    std::vector<float> full(params.size(), 0.0f), masked(params.size(), 0.0f);
    auto macs = [&] {
        std::uint64_t s = 0;
        for (auto m : model->backward_macs()) s += m;
        return s;
    };
    const auto m0 = macs();
    model->loss_and_gradient(params, b, full, LayerMask::all());
    const auto m1 = macs();
    model->loss_and_gradient(params, b, masked, LayerMask::from(1));
    const auto m2 = macs();
    // Counted where the kernels run: the full pass also propagates through fc2 and forms fc1's
    // weight gradient; the masked pass only forms fc2's.
    const std::uint64_t fc2_only = std::uint64_t{batch} * classes * (hidden + 1);
    CHECK(m2 - m1 == fc2_only);
    CHECK(m1 - m0 == fc2_only + std::uint64_t{batch} * hidden * classes +
                         std::uint64_t{batch} * hidden * (features + 1));
    // The fast layer's gradient is bit-identical; the slow one is not written.
    for (std::size_t k = fc2.offset; k < fc2.end(); ++k) REQUIRE(masked[k] == full[k]);
    for (std::size_t k = 0; k < fc2.offset; ++k) REQUIRE(masked[k] == 0.0f);

    // And it takes less time. The backward part of a pass is its time minus that of a pass
    // with no gradient (LayerMask::none: forward and loss only); the best of several rounds,
    // interleaved so that a busy machine slows all three alike.
    // One BLAS thread, as every peer runs, so that the other core's load matters less.
    const int threads = gossamer::blas_threads();
    gossamer::set_blas_threads(1);
    const LayerMask masks[3] = {LayerMask::none(), LayerMask::from(1), LayerMask::all()};
    double best[3] = {1e9, 1e9, 1e9};
    for (int r = 0; r < 15; ++r)
        for (int m = 0; m < 3; ++m) {
            const auto start = std::chrono::steady_clock::now();
            model->loss_and_gradient(params, b, full, masks[m]);
            const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
            best[m] = std::min(best[m], took.count());
        }
    gossamer::set_blas_threads(threads);
    const double t_masked = best[1] - best[0], t_full = best[2] - best[0];
    CAPTURE(best[0]);
    CAPTURE(t_full);
    CAPTURE(t_masked);
    CHECK(t_masked < 0.5 * t_full);
}

namespace {

// A consensus-only worker (no gradient) with a fast [0, 2) and a slow [2, 6) partition.
class RatedWorker final : public LocalWorker {
  public:
    RatedWorker(std::vector<float> x0, optim::Multirate rates)
        : x_(std::move(x0)), g_(x_.size(), 0.0f), rates_(std::move(rates)) {}
    std::size_t size() const override { return x_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return x_; }
    double compute_gradient(std::span<const float>) override { return 0.0; }
    std::span<const float> gradient() const override { return g_; }
    void apply_gradient(std::span<float>, std::span<const float>) override { ++steps_; }
    std::int64_t steps() const override { return steps_; }
    const optim::Multirate* multirate() const override { return &rates_; }

  private:
    std::vector<float> x_, g_;
    optim::Multirate rates_;
    std::int64_t steps_ = 0;
};

Network rated_network(int n, std::int64_t steps, optim::PartitionRate slow,
                      const char* options = "{}",
                      const Factory& factory = gossamer::proto::make_dpsgd,
                      const char* family = "one_peer_exponential") {
    topo::FamilySpec spec;
    spec.family = family;
    spec.n = n;
    auto schedule = topo::generate(spec);
    PartitionLayout layout({{"fast", 0, 2}, {"slow", 2, 4}}, 6);
    optim::Multirate rates(layout, {{}, slow}, optim::BackwardMode::skip);
    const gossamer::json::Document doc = gossamer::json::parse_text(options, "dpsgd.json");
    const gossamer::json::Node node(doc);
    return make_network(schedule, steps, factory, &node, [&](int i) {
        return std::make_unique<RatedWorker>(random_vector(6, 300 + static_cast<unsigned>(i)),
                                             rates);
    });
}

std::vector<std::vector<double>> part(const std::vector<std::vector<double>>& xs, std::size_t from,
                                      std::size_t to) {
    std::vector<std::vector<double>> out;
    for (const auto& x : xs) out.emplace_back(x.begin() + from, x.begin() + to);
    return out;
}

}  // namespace

TEST_CASE("dpsgd multirate: the slow partition gossips on its own round counter, no aliasing") {
    // One-peer exponential on 16 peers has period 4, so does the slow partition: mixed at steps
    // 3, 7, 11, 15 with topology round t it would use the same graph every time and never
    // agree. With its own counter it uses rounds 0, 1, 2, 3: the exact average.
    optim::PartitionRate slow;
    slow.period = 4;
    slow.gossip_period = 4;
    Network net = rated_network(16, 16, slow);
    const auto mean0 = mean_of(net.models());
    std::map<std::uint32_t, int> messages;
    HarnessOptions o = seconds_clock();
    o.step_jitter = 0.7;
    o.delay_jitter = 1.5;
    o.seed = 3;
    auto h = net.harness(o);
    h.on_send = [&](const Message& m) { ++messages[m.partition]; };
    REQUIRE(h.run());
    for (int i = 0; i < 16; ++i) {
        const auto& p = net.at<Dpsgd>(i);
        REQUIRE(p.channels() == 2);
        CHECK(p.partition_round(0) == 16);
        CHECK(p.partition_round(1) == 4);
    }
    CHECK(messages[0] == 16 * 16);  // one message per peer and step
    CHECK(messages[1] == 16 * 4);   // one per peer and slow round
    const auto models = net.models();
    CHECK(disagreement(part(models, 2, 6)) < 1e-5);
    CHECK(disagreement(part(models, 0, 2)) < 1e-5);
    CHECK(max_abs_diff(mean_of(models), mean0) < 1e-5);  // averaging keeps the mean
}

TEST_CASE("dpsgd multirate: a partition's own compressor shrinks its messages only") {
    optim::PartitionRate slow;
    slow.period = 2;
    slow.gossip_period = 2;
    Network plain = rated_network(8, 60, slow);
    slow.compressor = optim::CompressorConfig{};  // fp16
    Network packed = rated_network(8, 60, slow);
    REQUIRE(plain.harness().run());
    REQUIRE(packed.harness().run());
    const auto& a = plain.peers[0]->stats().partition_bytes_sent;
    const auto& b = packed.peers[0]->stats().partition_bytes_sent;
    REQUIRE(a.size() == 2);
    REQUIRE(b.size() == 2);
    CHECK(a[0] == b[0]);  // the fast partition still sends exact floats
    CHECK(b[1] < a[1]);
    // fp16 deltas with error feedback still reach consensus on the slow partition.
    CHECK(disagreement(part(packed.models(), 2, 6)) < 1e-2);
}

TEST_CASE("dpsgd multirate: a lost slow message is re-synchronised on its own partition") {
    optim::PartitionRate slow;
    slow.period = 4;
    slow.gossip_period = 4;
    Network net = rated_network(16, 32, slow, R"({"resync_timeout": 1.5})");
    const auto before = part(net.models(), 2, 6);
    auto h = net.harness();
    // Slow round 5 of peer 0 goes to peer 0 + 2 = 2 (the edge's second message, a delta); it
    // is lost, and no later message on that edge opens a gap: the wait times out.
    h.drop = [](const Message& m) {
        return m.kind == gossamer::proto::MessageKind::model_delta && m.partition == 1 &&
               m.sender == 0 && m.round == 5;
    };
    REQUIRE(h.run());
    CHECK(h.dropped() == 1);
    const auto* slow_edge = net.at<Dpsgd>(2).in_edge(0, 1);
    REQUIRE(slow_edge);
    CHECK(slow_edge->resyncs() == 1);
    CHECK(net.at<Dpsgd>(2).resync_requests() >= 1);
    CHECK(net.at<Dpsgd>(0).resync_answers() == 1);
    for (int i = 0; i < 16; ++i) CHECK(net.at<Dpsgd>(i).partition_round(1) == 8);
    CHECK(disagreement(part(net.models(), 2, 6)) < 0.01 * disagreement(before));
}

TEST_CASE("choco multirate: each partition gossips on its own counter with its own compressor") {
    optim::PartitionRate slow;
    slow.period = 4;
    slow.gossip_period = 4;
    optim::CompressorConfig int8;
    int8.kind = optim::CompressorKind::int8;
    slow.compressor = int8;
    using gossamer::proto::Choco;
    Network net =
        rated_network(8, 40, slow, R"({"gamma": 0.5})", gossamer::proto::make_choco, "ring");
    const auto before = net.models();
    std::map<std::uint32_t, int> messages;
    auto h = net.harness();
    h.on_send = [&](const Message& m) { ++messages[m.partition]; };
    REQUIRE(h.run());
    for (int i = 0; i < 8; ++i) {
        const auto& p = net.at<Choco>(i);
        REQUIRE(p.channels() == 2);
        CHECK(p.partition_round(0) == 40);
        CHECK(p.partition_round(1) == 10);
        for (int j : {(i + 1) % 8, (i + 7) % 8})
            for (std::size_t c = 0; c < 2; ++c) {
                const auto a = p.public_replica(j, c);
                const auto b = net.at<Choco>(j).neighbour_replica(i, c);
                REQUIRE(a.size() == (c == 0 ? 2u : 4u));
                CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
            }
    }
    CHECK(messages[0] == 8 * 2 * 40);  // two neighbours per peer and step
    CHECK(messages[1] == 8 * 2 * 10);
    // int8 with error feedback on the slow partition, fp16 (choco's default) on the fast one.
    const auto after = net.models();
    CHECK(disagreement(part(after, 0, 2)) < 0.05 * disagreement(part(before, 0, 2)));
    CHECK(disagreement(part(after, 2, 6)) < 0.5 * disagreement(part(before, 2, 6)));
    CHECK(max_abs_diff(mean_of(after), mean_of(before)) < 1e-3);
}
