#include "gossamer/optimizers/protocol/push_sum_math.hpp"

#include <algorithm>

#include "gossamer/optimizers/protocol/gossip_mix.hpp"

namespace gossamer::proto {

PushSumMath::PushSumMath(LocalWorker& worker) : math_(worker.math()), device_(worker.device()) {
    if (!math_) return;
    if (device_) {
        dz_ = DeviceVector(*device_, worker.size());
        dbuf_ = DeviceVector(*device_, worker.size());
        dscratch_ = DeviceVector(*device_, worker.size());
    } else {
        z_.resize(worker.size());
        buf_.assign(worker.size(), 0.0f);
    }
}

void PushSumMath::debias(std::span<const float> x, double w) {
    if (device_) return device_->debias(dz_.data(), x.data(), w, x.size());
    for (std::size_t k = 0; k < x.size(); ++k) z_[k] = static_cast<float>(x[k] / w);
}

void PushSumMath::debias_to_host(std::span<const float> x, double w, std::span<float> out) const {
    if (device_) {
        DeviceVector tmp(*device_, x.size());  // rare: the reported model, not every step
        device_->debias(tmp.data(), x.data(), w, x.size());
        return device_->download(out.first(x.size()), tmp.data());
    }
    for (std::size_t k = 0; k < x.size(); ++k) out[k] = static_cast<float>(x[k] / w);
}

void PushSumMath::set_z(std::span<const float> x) {
    if (device_) return device_->copy(dz_.data(), x.data(), x.size());
    std::copy(x.begin(), x.end(), z_.begin());
}

void PushSumMath::rescale(std::span<float> x, double w) {
    if (device_) return device_->scale(x.data(), w, dz_.data(), x.size());
    for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(w * z_[k]);
}

std::vector<float> PushSumMath::share(std::span<const float> x, double fraction) {
    std::vector<float> payload(x.size());
    if (device_) {
        device_->scale(dscratch_.data(), fraction, x.data(), x.size());
        device_->download(payload, dscratch_.data());
        return payload;
    }
    for (std::size_t k = 0; k < x.size(); ++k) payload[k] = static_cast<float>(fraction * x[k]);
    return payload;
}

void PushSumMath::keep(std::span<float> x, double self) {
    if (device_) return device_->mix(x.data(), self, {}, x.size());
    detail::mix(x, self, {});
}

void PushSumMath::add(std::span<float> x, std::span<const float> payload) {
    // 1 * x + 1 * payload: the one rounding of x + payload, as upload_add does.
    if (device_) return device_->upload_add(x.data(), payload);
    const detail::MixTerm term{1.0, payload};
    detail::mix(x, 1.0, {&term, 1});
}

void PushSumMath::buffer(std::span<const float> payload) {
    if (device_) return device_->upload_add(dbuf_.data(), payload);
    for (std::size_t k = 0; k < buf_.size(); ++k) buf_[k] += payload[k];
}

void PushSumMath::absorb(std::span<float> x) {
    if (device_) {
        const DeviceTerm term{dbuf_.data(), 1.0};
        device_->mix(x.data(), 1.0, {&term, 1}, x.size());
        return device_->zero(dbuf_.data(), x.size());
    }
    const detail::MixTerm term{1.0, buf_};
    detail::mix(x, 1.0, {&term, 1});
    std::fill(buf_.begin(), buf_.end(), 0.0f);
}

}  // namespace gossamer::proto
