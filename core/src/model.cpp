#include "gossamer/core/model.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gossamer {

LayerMask LayerMask::from(std::size_t first) {
    LayerMask m;
    m.first_ = first;
    return m;
}

LayerMask LayerMask::only(std::vector<bool> need) {
    LayerMask m;
    m.explicit_ = true;
    m.need_ = std::move(need);
    return m;
}

bool LayerMask::needs(std::size_t layer) const noexcept {
    if (explicit_) return layer < need_.size() && need_[layer];
    return layer >= first_;
}

std::optional<std::size_t> LayerMask::lowest(std::size_t layer_count) const noexcept {
    for (std::size_t l = 0; l < layer_count; ++l)
        if (needs(l)) return l;
    return std::nullopt;
}

void Model::check_gradient(std::span<const float> grad) const {
    if (grad.size() != parameter_count())
        throw Error(fmt::format("{}: gradient buffer of {} floats, the model has {} parameters",
                                name(), grad.size(), parameter_count()));
}

void Model::check_batch(std::span<const float> params, const Batch& batch) const {
    if (params.size() != parameter_count())
        throw Error(fmt::format("{}: {} parameters given, the model has {}", name(), params.size(),
                                parameter_count()));
    if (batch.size < 1 || batch.x == nullptr) throw Error(fmt::format("{}: empty batch", name()));
    if (batch.features != input_features())
        throw Error(fmt::format("{}: batch has {} features per sample, the model expects {}",
                                name(), batch.features, input_features()));
    if (classes() > 0 && batch.labels == nullptr)
        throw Error(fmt::format("{}: batch has no labels", name()));
    if (classes() == 0 && batch.targets == nullptr)
        throw Error(fmt::format("{}: batch has no regression targets", name()));
}

EvalResult Model::evaluate(std::span<const float> params, const Dataset& data, int batch_size) {
    if (batch_size < 1) throw Error(fmt::format("{}: batch size {} < 1", name(), batch_size));
    EvalResult result;
    double loss_sum = 0;
    std::int64_t correct = 0;
    const std::int64_t n = data.size();
    for (std::int64_t first = 0; first < n; first += batch_size) {
        Batch b;
        b.size = static_cast<int>(std::min<std::int64_t>(batch_size, n - first));
        b.features = data.features;
        b.x = data.x.data() + first * data.features;
        if (!data.labels.empty()) b.labels = data.labels.data() + first;
        if (!data.targets.empty()) b.targets = data.targets.data() + first;
        BatchStats s = forward(params, b);
        loss_sum += s.loss_sum;
        correct += s.correct;
    }
    result.samples = n;
    if (n > 0) {
        result.loss = loss_sum / static_cast<double>(n);
        if (classes() > 0) result.accuracy = static_cast<double>(correct) / static_cast<double>(n);
    }
    return result;
}

}  // namespace gossamer
