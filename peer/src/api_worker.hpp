#pragma once
// The LocalWorker behind gossamer::Peer (docs/library/api.md, "How it works"): its "gradient" is
// the update the user's own optimizer made, handed over by Peer::step().
//
// Three threads meet here. The driver's compute thread calls compute_gradient(at): it publishes
// `at` (the point of the next local step) and waits until the user hands over the step taken
// from it. The user's thread, inside Peer::step(), copies `at` into its parameters P when it is
// published, and later hands over delta = at - P_after. The communication thread applies delta
// to x with SGD at rate 1 (apply_gradient: x -= delta). So P is only touched by the user's
// thread, and `at` only while the compute thread waits in compute_gradient (the protocol keeps
// it valid until step_finished).
//
// With a device (PeerOptions::device), P, x and delta are device memory and every touch of them
// here is a Device call (copies and the delta kernel on the GPU); nothing else changes.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::api {

using Clock = std::chrono::steady_clock;

class UserWorker final : public proto::LocalWorker {
  public:
    /// x starts as a copy of `user`; `rates` (if active) drive per-partition gossip. With a
    /// `device`, `user` is that device's memory and so are x and delta.
    UserWorker(std::span<float> user, optim::Multirate rates,
               std::shared_ptr<proto::Device> device = nullptr);

    // LocalWorker (compute and communication threads).
    std::size_t size() const override { return user_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return device_ ? dx_.span() : std::span<float>(x_); }
    double compute_gradient(std::span<const float> at) override;
    std::span<const float> gradient() const override {
        return device_ ? std::span<const float>(ddelta_.span()) : std::span<const float>(delta_);
    }
    proto::Device* device() const override { return device_.get(); }
    void apply_gradient(std::span<float> x, std::span<const float> g) override;
    std::int64_t steps() const override { return applied_; }
    const optim::Multirate* multirate() const override {
        return rates_.active() ? &rates_ : nullptr;
    }

    /// What a wait of the user's thread ended with.
    enum class Wake { point, ended, timeout };
    /// User thread: waits until the next point is published (then copies it into P) or the job
    /// ended (then copies the final model into P, when it ended normally).
    Wake wait_point(Clock::time_point deadline);
    /// User thread, after wait_point returned `point`: hands over delta = at - P with `loss`.
    /// False when no point is held (the job ended).
    bool hand_over(double loss);
    /// User thread: steps not handed over yet are taken with a zero update from now on.
    void skip_rest();

    /// Communication side, once: the job ended normally with `final_model` (size() values), or
    /// with `error`. Wakes every wait.
    void end(std::vector<float> final_model, std::exception_ptr error);
    bool ended() const;
    /// The error the job ended with, or null.
    std::exception_ptr error() const;
    /// Steps handed over by the user.
    std::int64_t handed() const;

  private:
    std::span<float> user_;
    std::shared_ptr<proto::Device> device_;
    std::vector<float> x_, delta_;     // host memory (no device)
    proto::DeviceVector dx_, ddelta_;  // device memory (with a device)
    proto::DeviceVector dzero_;        // device: zeros for a skipped step, made when needed
    optim::Multirate rates_;
    std::int64_t applied_ = 0;  // communication thread

    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::span<const float> at_;  // published point; valid while published_
    bool published_ = false;     // the compute thread waits in compute_gradient
    bool taken_ = false;         // the user copied the published point into P
    bool handed_ = false;        // the user handed over this step's delta
    bool skip_ = false;
    double loss_ = 0;
    std::int64_t handed_count_ = 0;
    bool ended_ = false;
    std::vector<float> final_;
    std::exception_ptr error_;
};

/// The device PeerOptions::device names: nullptr for "cpu". ConfigError (field
/// PeerOptions::device) for an unknown name, or "cuda" without CUDA support or a GPU.
std::shared_ptr<proto::Device> make_peer_device(const std::string& name);

}  // namespace gossamer::api
