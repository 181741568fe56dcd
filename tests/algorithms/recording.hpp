#pragma once
// A worker that records the point of every gradient it computes: a synchronous protocol's
// model at the start of each step, for loss-per-round curves.
#include <memory>
#include <span>
#include <vector>

#include "gossamer/optimizers/protocol/protocol.hpp"

namespace algos_test {

class RecordingWorker final : public gossamer::proto::LocalWorker {
  public:
    explicit RecordingWorker(std::unique_ptr<gossamer::proto::LocalWorker> inner)
        : inner_(std::move(inner)) {}
    std::size_t size() const override { return inner_->size(); }
    bool math() const override { return inner_->math(); }
    std::span<float> params() override { return inner_->params(); }
    double compute_gradient(std::span<const float> at) override {
        points.emplace_back(at.begin(), at.end());
        return inner_->compute_gradient(at);
    }
    std::span<const float> gradient() const override { return inner_->gradient(); }
    void apply_gradient(std::span<float> x, std::span<const float> g) override {
        inner_->apply_gradient(x, g);
    }
    std::int64_t steps() const override { return inner_->steps(); }

    std::vector<std::vector<float>> points;  ///< by step

  private:
    std::unique_ptr<gossamer::proto::LocalWorker> inner_;
};

}  // namespace algos_test
