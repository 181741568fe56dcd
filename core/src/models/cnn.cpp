// The convolutional network: conv ('same', stride 1) -> ReLU -> 2x2 max-pool stages, then a linear
// head. Activations are NHWC so that im2col rows are contiguous and every convolution is one
// GEMM over the whole batch: [n*h*w x k*k*cin] * [k*k*cin x cout].

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "gossamer/core/models.hpp"
#include "gossamer/core/rng.hpp"
#include "models/ops.hpp"

namespace gossamer::models {
namespace {

struct Stage {
    int h, w, cin, cout;  // convolution input/output size (h x w) and channels
    std::size_t patch;    // k*k*cin: one im2col row, one filter
};

class Cnn final : public Model {
  public:
    explicit Cnn(const CnnSpec& spec) : spec_(spec) {
        if (spec.channels < 1 || spec.height < 1 || spec.width < 1)
            throw Error(fmt::format("cnn: input shape {}x{}x{} must be positive", spec.channels,
                                    spec.height, spec.width));
        if (spec.kernel < 1 || spec.kernel % 2 == 0)
            throw Error(fmt::format("cnn: kernel {} must be odd and positive ('same' padding)",
                                    spec.kernel));
        if (spec.filters.empty()) throw Error("cnn: needs at least one convolution stage");
        if (spec.classes < 2)
            throw Error(fmt::format("cnn: {} classes; need at least 2", spec.classes));
        int h = spec.height, w = spec.width, c = spec.channels;
        std::size_t offset = 0;
        for (std::size_t s = 0; s < spec.filters.size(); ++s) {
            if (spec.filters[s] < 1)
                throw Error(fmt::format("cnn: stage {} has {} filters; must be positive", s + 1,
                                        spec.filters[s]));
            if (h < 2 || w < 2)
                throw Error(
                    fmt::format("cnn: stage {} gets a {}x{} image, too small for 2x2 "
                                "pooling; use fewer stages or larger images",
                                s + 1, h, w));
            Stage st{h, w, c, spec.filters[s],
                     static_cast<std::size_t>(spec.kernel) * spec.kernel * c};
            const std::size_t size = (st.patch + 1) * static_cast<std::size_t>(st.cout);
            layers_.push_back({fmt::format("conv{}", s + 1), offset, size});
            offset += size;
            stages_.push_back(st);
            h /= 2, w /= 2, c = st.cout;
        }
        flat_ = static_cast<std::size_t>(h) * w * c;
        layers_.push_back({"fc", offset, (flat_ + 1) * static_cast<std::size_t>(spec.classes)});
        total_ = layers_.back().end();
        buf_.resize(stages_.size());
    }

    std::string name() const override { return "cnn"; }
    std::string describe() const override {
        return fmt::format("cnn {}x{}x{} conv{}x{} {} fc {} ({} parameters)", spec_.channels,
                           spec_.height, spec_.width, spec_.kernel, spec_.kernel,
                           fmt::join(spec_.filters, "-"), spec_.classes, total_);
    }
    std::size_t parameter_count() const override { return total_; }
    std::span<const Layer> layers() const override { return layers_; }
    int input_features() const override { return spec_.channels * spec_.height * spec_.width; }
    int classes() const override { return spec_.classes; }

    void init(std::span<float> params, std::uint64_t seed) const override {
        if (params.size() != total_)
            throw Error(fmt::format("cnn: init of {} floats, the model has {} parameters",
                                    params.size(), total_));
        for (std::size_t s = 0; s < stages_.size(); ++s) {
            const Stage& st = stages_[s];
            auto w = params.subspan(layers_[s].offset, st.patch * st.cout);
            ops::he_normal(w, static_cast<int>(st.patch), derive_seed(seed, s));
            auto bias = params.subspan(layers_[s].offset + w.size(), st.cout);
            std::fill(bias.begin(), bias.end(), 0.0f);
        }
        const std::size_t fc = stages_.size();
        auto w = params.subspan(layers_[fc].offset, flat_ * spec_.classes);
        ops::glorot_uniform(w, static_cast<int>(flat_), spec_.classes, derive_seed(seed, fc));
        auto bias = params.subspan(layers_[fc].offset + w.size(), spec_.classes);
        std::fill(bias.begin(), bias.end(), 0.0f);
    }

    double loss_and_gradient(std::span<const float> params, const Batch& batch,
                             std::span<float> grad, const LayerMask& need) override {
        check_batch(params, batch);
        const auto lowest = need.lowest(layers_.size());
        if (lowest) check_gradient(grad);
        const int n = batch.size;
        const BatchStats stats =
            ops::softmax_xent(run_forward(params, batch), batch.labels, n, spec_.classes, true);
        if (!lowest) return stats.loss_sum / n;

        const std::size_t fc = stages_.size();
        const float* flat = buf_.back().pool.data();
        const float* wfc = params.data() + layers_[fc].offset;
        const int f = static_cast<int>(flat_), k = spec_.classes;
        if (need.needs(fc)) {
            float* g = grad.data() + layers_[fc].offset;
            ops::gemm(true, false, k, f, n, 1.0f, logits_.data(), k, flat, f, 0.0f, g, f);
            ops::bias_grad(logits_.data(), n, k, g + flat_ * k);
        }
        if (*lowest == fc) return stats.loss_sum / n;
        dpool_.resize(static_cast<std::size_t>(n) * flat_);
        ops::gemm(false, false, n, f, k, 1.0f, logits_.data(), k, wfc, f, 0.0f, dpool_.data(), f);

        for (std::size_t s = stages_.size(); s-- > *lowest;) {
            const Stage& st = stages_[s];
            Buffers& b = buf_[s];
            const int m = n * st.h * st.w, patch = static_cast<int>(st.patch);
            dconv_.resize(b.conv.size());
            ops::maxpool_backward(dpool_.data(), b.arg.data(), b.pool.size(), dconv_.data(),
                                  dconv_.size());
            ops::relu_backward(dconv_.data(), b.conv.data(), dconv_.size());
            if (need.needs(s)) {
                float* g = grad.data() + layers_[s].offset;
                ops::gemm(true, false, st.cout, patch, m, 1.0f, dconv_.data(), st.cout,
                          b.cols.data(), patch, 0.0f, g, patch);
                ops::bias_grad(dconv_.data(), m, st.cout, g + st.patch * st.cout);
            }
            if (s == *lowest) break;
            const float* w = params.data() + layers_[s].offset;
            dcols_.resize(static_cast<std::size_t>(m) * st.patch);
            ops::gemm(false, false, m, patch, st.cout, 1.0f, dconv_.data(), st.cout, w, patch, 0.0f,
                      dcols_.data(), patch);
            dpool_.resize(static_cast<std::size_t>(m) * st.cin);
            ops::col2im(dcols_.data(), nhwc(st, n), spec_.kernel, dpool_.data());
        }
        return stats.loss_sum / n;
    }

    BatchStats forward(std::span<const float> params, const Batch& batch) override {
        check_batch(params, batch);
        return ops::softmax_xent(run_forward(params, batch), batch.labels, batch.size,
                                 spec_.classes, false);
    }

    std::unique_ptr<Model> clone() const override { return std::make_unique<Cnn>(spec_); }

  private:
    struct Buffers {
        std::vector<float> cols;        // im2col of the stage input
        std::vector<float> conv;        // convolution output after ReLU, NHWC
        std::vector<float> pool;        // pooled output, NHWC
        std::vector<std::int32_t> arg;  // per pooled value: index of the maximum in conv
    };

    static ops::Image nhwc(const Stage& st, int n) {
        const auto c = static_cast<std::size_t>(st.cin);
        return {n, st.h, st.w, st.cin, st.h * st.w * c, st.w * c, c, 1};
    }

    float* run_forward(std::span<const float> params, const Batch& batch) {
        const int n = batch.size;
        const float* x = batch.x;
        for (std::size_t s = 0; s < stages_.size(); ++s) {
            const Stage& st = stages_[s];
            Buffers& b = buf_[s];
            // The data is CHW; the first stage reads it in place through strides.
            const auto hw = static_cast<std::size_t>(st.h) * st.w;
            const ops::Image g =
                s == 0
                    ? ops::Image{n, st.h, st.w, st.cin, hw * st.cin, static_cast<std::size_t>(st.w),
                                 1, hw}
                    : nhwc(st, n);
            const int m = n * st.h * st.w, patch = static_cast<int>(st.patch);
            b.cols.resize(static_cast<std::size_t>(m) * st.patch);
            ops::im2col(x, g, spec_.kernel, b.cols.data());
            const float* w = params.data() + layers_[s].offset;
            b.conv.resize(static_cast<std::size_t>(m) * st.cout);
            ops::gemm(false, true, m, st.cout, patch, 1.0f, b.cols.data(), patch, w, patch, 0.0f,
                      b.conv.data(), st.cout);
            ops::add_bias(b.conv.data(), w + st.patch * st.cout, m, st.cout);
            ops::relu(b.conv.data(), b.conv.size());
            const std::size_t pooled =
                static_cast<std::size_t>(n) * (st.h / 2) * (st.w / 2) * st.cout;
            b.pool.resize(pooled);
            b.arg.resize(pooled);
            ops::maxpool_forward(b.conv.data(), n, st.h, st.w, st.cout, b.pool.data(),
                                 b.arg.data());
            x = b.pool.data();
        }
        const std::size_t fc = stages_.size();
        const float* w = params.data() + layers_[fc].offset;
        const int f = static_cast<int>(flat_), k = spec_.classes;
        logits_.resize(static_cast<std::size_t>(n) * k);
        ops::gemm(false, true, n, k, f, 1.0f, x, f, w, f, 0.0f, logits_.data(), k);
        ops::add_bias(logits_.data(), w + flat_ * k, n, k);
        return logits_.data();
    }

    CnnSpec spec_;
    std::vector<Stage> stages_;
    std::vector<Layer> layers_;
    std::size_t flat_ = 0, total_ = 0;
    std::vector<Buffers> buf_;
    std::vector<float> logits_, dpool_, dconv_, dcols_;
};

}  // namespace

std::unique_ptr<Model> cnn(const CnnSpec& spec) {
    return std::make_unique<Cnn>(spec);
}

}  // namespace gossamer::models
