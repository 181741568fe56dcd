// What re-quantising at every reduce-scatter hop costs (docs/algorithms/qallreduce.md, "Where
// the ring re-quantises"): one all-reduce of n vectors without error feedback against the exact
// mean and against quantising each contribution once (what a parameter server or an all-gather
// of compressed vectors would average).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/optimizers/compress/compressor.hpp"
#include "gossamer/optimizers/protocols/qallreduce/qallreduce.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/network.hpp"

using namespace gossamer::testing;
namespace json = gossamer::json;
namespace optim = gossamer::optim;
namespace proto = gossamer::proto;

namespace {

// Contributes c_r once and keeps what the all-reduce applied.
class RecordingWorker final : public LocalWorker {
  public:
    explicit RecordingWorker(std::vector<float> c) : x_(c.size(), 0.0f), c_(std::move(c)) {}
    std::size_t size() const override { return x_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return x_; }
    double compute_gradient(std::span<const float>) override { return 0.0; }
    std::span<const float> gradient() const override { return c_; }
    void apply_gradient(std::span<float>, std::span<const float> g) override {
        applied.assign(g.begin(), g.end());
        ++steps_;
    }
    std::int64_t steps() const override { return steps_; }
    std::vector<float> applied;

  private:
    std::vector<float> x_, c_;
    std::int64_t steps_ = 0;
};

// Pseudo-gradients of peers that train the same model agree in direction: c_r = m + xi_r.
std::vector<float> contribution(std::size_t d, int r) {
    const auto m = random_vector(d, 7), xi = random_vector(d, 100 + static_cast<unsigned>(r));
    std::vector<float> c(d);
    for (std::size_t k = 0; k < d; ++k) c[k] = m[k] + xi[k];
    return c;
}

double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
    double e = 0, w = 0;
    for (std::size_t k = 0; k < want.size(); ++k) {
        e += (got[k] - want[k]) * (got[k] - want[k]);
        w += want[k] * want[k];
    }
    return std::sqrt(e / w);
}

struct HopErrors {
    double ring, once;
};

HopErrors measure(const std::string& codec, int n, std::size_t d) {
    const std::string text = R"({"compressor": )" + codec + R"(, "error_feedback": false})";
    json::Document doc = json::parse_text(text, "q.json");
    json::Node node(doc);
    gossamer::topology::FamilySpec f;
    f.family = "ring";
    f.n = n;
    Network net =
        make_network(gossamer::topology::generate(f), 1, proto::make_qallreduce, &node,
                     [&](int r) { return std::make_unique<RecordingWorker>(contribution(d, r)); });
    REQUIRE(net.harness().run());
    std::vector<double> mean(d, 0.0);
    std::vector<float> once(d, 0.0f);
    const auto q = optim::make_compressor(proto::parse_qallreduce_options(&node).compressor);
    for (int r = 0; r < n; ++r) {
        const auto c = contribution(d, r);
        std::vector<std::byte> wire(q->encoded_bytes(d));
        const optim::CodecKey key{0, static_cast<std::uint64_t>(r), 0};
        q->encode(c, key, wire);
        std::vector<float> back(d, 0.0f);
        q->decode(wire, key, back);
        for (std::size_t k = 0; k < d; ++k) {
            mean[k] += double(c[k]) / n;
            once[k] += back[k] / static_cast<float>(n);
        }
    }
    const auto& applied = dynamic_cast<RecordingWorker&>(*net.workers[0]).applied;
    for (int r = 1; r < n; ++r)  // every peer applies the same floats
        CHECK(dynamic_cast<RecordingWorker&>(*net.workers[static_cast<std::size_t>(r)]).applied ==
              applied);
    return {rel_error(applied, mean), rel_error(once, mean)};
}

}  // namespace

TEST_CASE("qallreduce re-quantises every reduce-scatter hop: its error grows with the ring") {
    const std::size_t d = 4096;
    for (const char* codec :
         {R"({"name": "int4"})", R"({"name": "int8"})", R"({"name": "fp16"})"}) {
        double last = 0;
        for (int n : {2, 4, 8, 16}) {
            const HopErrors e = measure(codec, n, d);
            MESSAGE(std::string(codec) << " n " << n << ": ring " << e.ring << ", quantised once "
                                       << e.once << " (" << e.ring / e.once << "x)");
            CAPTURE(codec);
            CAPTURE(n);
            if (n >= 4) CHECK(e.ring > e.once);  // each hop adds the error of a larger sum
            CHECK(e.ring >= last * 0.9);         // and longer rings have more hops
            last = e.ring;
        }
    }
}
