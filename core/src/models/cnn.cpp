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
        macs_.assign(layers_.size(), 0);
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
            macs_[fc] += static_cast<std::uint64_t>(n) * k * (f + 1);
        }
        if (*lowest == fc) return stats.loss_sum / n;
        macs_[fc] += static_cast<std::uint64_t>(n) * f * k;
        dpool_.resize(static_cast<std::size_t>(n) * flat_);
        ops::gemm(false, false, n, f, k, 1.0f, logits_.data(), k, wfc, f, 0.0f, dpool_.data(), f);

        for (std::size_t s = stages_.size(); s-- > *lowest;) {
            const Stage& st = stages_[s];
            Buffers& b = buf_[s];
            const int patch = static_cast<int>(st.patch);
            dconv_.resize(b.conv.size());
            ops::maxpool_backward(dpool_.data(), b.arg.data(), b.pool.size(), dconv_.data(),
                                  dconv_.size());
            ops::relu_backward(dconv_.data(), b.conv.data(), dconv_.size());
            const bool want_w = need.needs(s), want_x = s > *lowest;
            float* g = want_w ? grad.data() + layers_[s].offset : nullptr;
            const float* w = params.data() + layers_[s].offset;
            const ops::Image in = image(s, n);
            const float* x = input(s, batch);
            if (want_x) dpool_.resize(static_cast<std::size_t>(n) * in.sample);  // stage s - 1
            const std::size_t pixels = static_cast<std::size_t>(st.h) * st.w;
            for (int first = 0, step = chunk(st); first < n; first += step) {
                const int count = std::min(step, n - first), m = count * st.h * st.w;
                const float* dy = dconv_.data() + first * pixels * st.cout;
                ops::Image part = in;
                part.batch = count;
                if (want_w) {
                    ops::im2col(x + first * in.sample, part, spec_.kernel, cols_.data());
                    ops::gemm(true, false, st.cout, patch, m, 1.0f, dy, st.cout, cols_.data(),
                              patch, first == 0 ? 0.0f : 1.0f, g, patch);
                    macs_[s] += static_cast<std::uint64_t>(m) * patch * st.cout;
                }
                if (want_x) {
                    ops::gemm(false, false, m, patch, st.cout, 1.0f, dy, st.cout, w, patch, 0.0f,
                              cols_.data(), patch);
                    macs_[s] += static_cast<std::uint64_t>(m) * patch * st.cout;
                    ops::col2im(cols_.data(), part, spec_.kernel,
                                dpool_.data() + first * in.sample);
                }
            }
            if (want_w) {
                ops::bias_grad(dconv_.data(), n * st.h * st.w, st.cout, g + st.patch * st.cout);
            }
        }
        return stats.loss_sum / n;
    }

    BatchStats forward(std::span<const float> params, const Batch& batch) override {
        check_batch(params, batch);
        return ops::softmax_xent(run_forward(params, batch), batch.labels, batch.size,
                                 spec_.classes, false);
    }

    std::span<const std::uint64_t> backward_macs() const override { return macs_; }

    std::unique_ptr<Model> clone() const override { return std::make_unique<Cnn>(spec_); }

  private:
    struct Buffers {
        std::vector<float> conv;        // convolution output after ReLU, NHWC
        std::vector<float> pool;        // pooled output, NHWC
        std::vector<std::int32_t> arg;  // per pooled value: index of the maximum in conv
    };

    // Convolutions run over chunks of samples whose im2col matrix stays near 1 MiB, so that it
    // is still in cache when the GEMM (and, backwards, col2im) reads it; the whole-batch
    // matrix of the second stage would be 20 MiB at batch 64.
    static constexpr std::size_t kChunkFloats = std::size_t{1} << 18;
    static int chunk(const Stage& st) {
        const std::size_t per_sample = static_cast<std::size_t>(st.h) * st.w * st.patch;
        return static_cast<int>(std::max<std::size_t>(1, kChunkFloats / per_sample));
    }

    // Geometry of stage s's input for n samples: the data is CHW (read in place through
    // strides), later stages read the NHWC output of the previous pooling.
    ops::Image image(std::size_t s, int n) const {
        const Stage& st = stages_[s];
        const auto hw = static_cast<std::size_t>(st.h) * st.w;
        const auto c = static_cast<std::size_t>(st.cin);
        if (s == 0) return {n, st.h, st.w, st.cin, hw * c, static_cast<std::size_t>(st.w), 1, hw};
        return {n, st.h, st.w, st.cin, hw * c, st.w * c, c, 1};
    }

    const float* input(std::size_t s, const Batch& batch) const {
        return s == 0 ? batch.x : buf_[s - 1].pool.data();
    }

    float* run_forward(std::span<const float> params, const Batch& batch) {
        const int n = batch.size;
        for (std::size_t s = 0; s < stages_.size(); ++s) {
            const Stage& st = stages_[s];
            Buffers& b = buf_[s];
            const int patch = static_cast<int>(st.patch);
            const float* w = params.data() + layers_[s].offset;
            const ops::Image in = image(s, n);
            const float* x = input(s, batch);
            const std::size_t pixels = static_cast<std::size_t>(st.h) * st.w;
            b.conv.resize(n * pixels * st.cout);
            const int step = chunk(st);
            cols_.resize(std::max(cols_.size(), std::min(step, n) * pixels * st.patch));
            for (int first = 0; first < n; first += step) {
                const int count = std::min(step, n - first), m = count * st.h * st.w;
                ops::Image part = in;
                part.batch = count;
                ops::im2col(x + first * in.sample, part, spec_.kernel, cols_.data());
                ops::gemm(false, true, m, st.cout, patch, 1.0f, cols_.data(), patch, w, patch, 0.0f,
                          b.conv.data() + first * pixels * st.cout, st.cout);
            }
            ops::add_bias(b.conv.data(), w + st.patch * st.cout, n * st.h * st.w, st.cout);
            ops::relu(b.conv.data(), b.conv.size());
            const std::size_t pooled =
                static_cast<std::size_t>(n) * (st.h / 2) * (st.w / 2) * st.cout;
            b.pool.resize(pooled);
            b.arg.resize(pooled);
            ops::maxpool_forward(b.conv.data(), n, st.h, st.w, st.cout, b.pool.data(),
                                 b.arg.data());
        }
        const std::size_t fc = stages_.size();
        const float* x = buf_.back().pool.data();
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
    std::vector<float> logits_, dpool_, dconv_;
    std::vector<float> cols_;          // im2col (forward) or its gradient (backward) of one chunk
    std::vector<std::uint64_t> macs_;  // backward multiply-adds per layer
};

}  // namespace

std::unique_ptr<Model> cnn(const CnnSpec& spec) {
    return std::make_unique<Cnn>(spec);
}

}  // namespace gossamer::models
