#include "api_worker.hpp"

#include <algorithm>
#include <cassert>

namespace gossamer::api {

UserWorker::UserWorker(std::span<float> user, optim::Multirate rates,
                       std::shared_ptr<proto::Device> device)
    : user_(user), device_(std::move(device)), rates_(std::move(rates)) {
    if (device_) {
        dx_ = proto::DeviceVector(*device_, user.size());
        ddelta_ = proto::DeviceVector(*device_, user.size());
        device_->copy(dx_.data(), user.data(), user.size());
    } else {
        x_.assign(user.begin(), user.end());
        delta_.assign(user.size(), 0.0f);
    }
}

double UserWorker::compute_gradient(std::span<const float> at) {
    std::unique_lock lock(mutex_);
    if (!skip_ && !ended_) {
        at_ = at;
        published_ = true;
        taken_ = false;
        cv_.notify_all();
        // Ends when the user hands over the step or leaves (skip_rest). An error of the
        // communication loop cannot end it: the driver joins this thread before run() throws,
        // so the user's next step() or finish() (or ~Peer) is what lets it go.
        cv_.wait(lock, [&] { return handed_ || skip_ || ended_; });
        published_ = false;
        at_ = {};
    }
    if (handed_) {
        handed_ = false;  // delta_ holds the user's update
    } else if (device_) {
        if (dzero_.empty()) dzero_ = proto::DeviceVector(*device_, size());
        device_->copy(ddelta_.data(), dzero_.data(), size());
    } else {
        std::fill(delta_.begin(), delta_.end(), 0.0f);
    }
    return loss_;
}

void UserWorker::apply_gradient(std::span<float> x, std::span<const float> g) {
    assert(x.size() == g.size());
    if (device_) {
        device_->axpy(x.data(), -1.0f, g.data(), x.size());  // x + (-1)g: exactly x - g
    } else {
        for (std::size_t k = 0; k < x.size(); ++k) x[k] -= g[k];
    }
    ++applied_;
}

UserWorker::Wake UserWorker::wait_point(Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_until(lock, deadline, [&] { return (published_ && !taken_) || ended_; }))
        return Wake::timeout;
    if (published_ && !taken_ && !ended_) {
        if (device_) {
            device_->copy(user_.data(), at_.data(), size());
        } else {
            std::copy(at_.begin(), at_.end(), user_.begin());
        }
        taken_ = true;
        return Wake::point;
    }
    if (!error_ && !final_.empty()) {
        if (device_) {
            device_->upload(user_.data(), final_);
        } else {
            std::copy(final_.begin(), final_.end(), user_.begin());
        }
    }
    return Wake::ended;
}

bool UserWorker::hand_over(double loss) {
    std::lock_guard lock(mutex_);
    if (!published_ || !taken_ || handed_) return false;
    // The compute thread waits in compute_gradient, so at_ and delta_ are the user's now.
    if (device_) {
        device_->delta(ddelta_.data(), at_.data(), user_.data(), size());
    } else {
        for (std::size_t k = 0; k < delta_.size(); ++k) delta_[k] = at_[k] - user_[k];
    }
    loss_ = loss;
    handed_ = true;
    ++handed_count_;
    cv_.notify_all();
    return true;
}

void UserWorker::skip_rest() {
    std::lock_guard lock(mutex_);
    skip_ = true;
    cv_.notify_all();
}

void UserWorker::end(std::vector<float> final_model, std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (ended_) return;
    ended_ = true;
    final_ = std::move(final_model);
    error_ = std::move(error);
    cv_.notify_all();
}

bool UserWorker::ended() const {
    std::lock_guard lock(mutex_);
    return ended_;
}

std::exception_ptr UserWorker::error() const {
    std::lock_guard lock(mutex_);
    return error_;
}

std::int64_t UserWorker::handed() const {
    std::lock_guard lock(mutex_);
    return handed_count_;
}

}  // namespace gossamer::api
