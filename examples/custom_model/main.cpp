// A model of your own in Gossamer: a one-hidden-layer tanh network written by hand, registered
// under the name "tanh_net" so that a training config can use it, then trained on the synthetic
// logistic-regression set with Gossamer's local trainer.
//
// Build: part of the project (examples/custom_model); run:
// build/.../examples/custom_model/custom_model
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/core/model.hpp"
#include "gossamer/core/models.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/core/synthetic.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"

namespace {

using gossamer::Batch;
using gossamer::Layer;

// features -> hidden (tanh) -> classes (softmax cross-entropy). Parameters: W1 (hidden x
// features), b1, W2 (classes x hidden), b2; layers "hidden" and "out".
class TanhNet final : public gossamer::Model {
  public:
    TanhNet(int features, int hidden, int classes) : f_(features), h_(hidden), c_(classes) {
        const auto n1 = static_cast<std::size_t>(h_) * (f_ + 1);
        const auto n2 = static_cast<std::size_t>(c_) * (h_ + 1);
        layers_ = {{"hidden", 0, n1}, {"out", n1, n2}};
    }
    std::string name() const override { return "tanh_net"; }
    std::string describe() const override {
        return "tanh_net " + std::to_string(f_) + "-" + std::to_string(h_) + "-" +
               std::to_string(c_);
    }
    std::size_t parameter_count() const override { return layers_[1].end(); }
    std::span<const Layer> layers() const override { return layers_; }
    int input_features() const override { return f_; }
    int classes() const override { return c_; }

    void init(std::span<float> p, std::uint64_t seed) const override {
        gossamer::Rng rng(seed);
        for (auto& v : p) v = static_cast<float>(0.3 * rng.normal());
    }

    double loss_and_gradient(std::span<const float> p, const Batch& b, std::span<float> g,
                             const gossamer::LayerMask& need) override {
        check_batch(p, b);
        check_gradient(g);
        const bool g1 = need.needs(0), g2 = need.needs(1);
        if (g1) std::fill(g.begin(), g.begin() + static_cast<long>(layers_[0].size), 0.0f);
        if (g2) std::fill(g.begin() + static_cast<long>(layers_[1].offset), g.end(), 0.0f);
        double loss = 0;
        std::vector<float> a(static_cast<std::size_t>(h_)), prob(static_cast<std::size_t>(c_));
        std::vector<float> da(static_cast<std::size_t>(h_));
        for (int s = 0; s < b.size; ++s) {
            const float* x = b.x + static_cast<std::size_t>(s) * f_;
            loss += forward_one(p, x, b.labels[s], a, prob);
            const float scale = 1.0f / static_cast<float>(b.size);
            std::fill(da.begin(), da.end(), 0.0f);
            for (int k = 0; k < c_; ++k) {
                const float d = (prob[k] - (k == b.labels[s] ? 1.0f : 0.0f)) * scale;
                const float* w2 = &p[w2_at(k, 0)];
                for (int j = 0; j < h_; ++j) {
                    if (g2) g[w2_at(k, j)] += d * a[j];
                    da[j] += d * w2[j];
                }
                if (g2) g[w2_at(k, h_)] += d;
            }
            if (!g1) continue;
            for (int j = 0; j < h_; ++j) {
                const float dz = da[j] * (1.0f - a[j] * a[j]);
                for (int i = 0; i < f_; ++i) g[w1_at(j, i)] += dz * x[i];
                g[w1_at(j, f_)] += dz;
            }
        }
        return loss / b.size;
    }

    gossamer::BatchStats forward(std::span<const float> p, const Batch& b) override {
        check_batch(p, b);
        gossamer::BatchStats st;
        std::vector<float> a(static_cast<std::size_t>(h_)), prob(static_cast<std::size_t>(c_));
        for (int s = 0; s < b.size; ++s) {
            st.loss_sum +=
                forward_one(p, b.x + static_cast<std::size_t>(s) * f_, b.labels[s], a, prob);
            const int best =
                static_cast<int>(std::max_element(prob.begin(), prob.end()) - prob.begin());
            st.correct += best == b.labels[s];
        }
        return st;
    }

    std::unique_ptr<gossamer::Model> clone() const override {
        return std::make_unique<TanhNet>(f_, h_, c_);
    }

  private:
    std::size_t w1_at(int j, int i) const { return static_cast<std::size_t>(j) * (f_ + 1) + i; }
    std::size_t w2_at(int k, int j) const {
        return layers_[1].offset + static_cast<std::size_t>(k) * (h_ + 1) + j;
    }

    // Hidden activations and class probabilities of one sample; returns its loss.
    double forward_one(std::span<const float> p, const float* x, int label, std::vector<float>& a,
                       std::vector<float>& prob) const {
        for (int j = 0; j < h_; ++j) {
            float z = p[w1_at(j, f_)];
            for (int i = 0; i < f_; ++i) z += p[w1_at(j, i)] * x[i];
            a[j] = std::tanh(z);
        }
        float top = -1e30f;
        for (int k = 0; k < c_; ++k) {
            float z = p[w2_at(k, h_)];
            for (int j = 0; j < h_; ++j) z += p[w2_at(k, j)] * a[j];
            prob[k] = z;
            top = std::max(top, z);
        }
        double sum = 0;
        for (auto& v : prob) sum += (v = std::exp(v - top));
        for (auto& v : prob) v = static_cast<float>(v / sum);
        return -std::log(std::max(1e-30, static_cast<double>(prob[label])));
    }

    int f_, h_, c_;
    std::vector<Layer> layers_;
};

}  // namespace

int main() {
    // Register the model so that configs can say {"name": "tanh_net", "hidden": 16}.
    gossamer::models::register_model(
        "tanh_net", [](const gossamer::json::Node& node, const gossamer::models::DataShape& data) {
            node.expect_object({"name", "hidden"});
            const int hidden =
                node.find("hidden") ? static_cast<int>(node.at("hidden").as_int(1, 4096)) : 16;
            return std::make_unique<TanhNet>(data.features, hidden, data.classes);
        });

    auto set = gossamer::make_logistic_regression(2000, 10, 3);
    auto config = gossamer::json::parse_text(R"({"name": "tanh_net", "hidden": 16})", "inline");
    auto model = gossamer::models::make_model(gossamer::json::Node(config),
                                              gossamer::models::shape_of(set.data));
    const auto layout = model->default_partitions();
    gossamer::optim::OptimizerConfig sgd;
    sgd.lr = 0.2;
    sgd.momentum = 0.9;
    gossamer::optim::LocalTrainer trainer(std::move(model), layout, sgd,
                                          gossamer::optim::LrSchedule({}, sgd.lr), set.data, 50, 1);
    const double before = trainer.evaluate(set.data).loss;
    for (int step = 0; step < 800; ++step) trainer.step();
    const auto after = trainer.evaluate(set.data);
    std::printf("%s: loss %.4f -> %.4f, accuracy %.1f%%\n", trainer.model().describe().c_str(),
                before, after.loss, 100 * after.accuracy.value_or(0));
    // Success when training clearly learned something: the caller (a test) checks the exit code.
    return after.loss < 0.8 * before && after.accuracy.value_or(0) > 0.7 ? 0 : 1;
}
