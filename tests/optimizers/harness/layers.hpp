#pragma once
/// Layers around a protocol for the harness (harness.hpp, Peers::protocol_layers): the seam the
/// outer-optimizer layer of the next issues plugs into. PassThrough hands every event to the
/// protocol it wraps and answers every question with it, so a protocol under it must send the
/// same bytes as without it (test_harness.cpp); a real layer overrides what it changes.

#include <memory>
#include <utility>

#include "gossamer/optimizers/protocol/protocol.hpp"
#include "optimizers/harness/harness.hpp"

namespace gossamer::testing {

class PassThrough : public proto::Protocol {
  public:
    PassThrough(std::unique_ptr<proto::Protocol> inner, const proto::PeerContext& ctx)
        : Protocol(ctx), inner_(std::move(inner)) {}

    std::string_view name() const override { return inner_->name(); }
    std::span<const float> compute_point() override { return inner_->compute_point(); }
    void current_model(std::span<float> out) const override { inner_->current_model(out); }
    double mass() const override { return inner_->mass(); }
    double held_mass() const override { return inner_->held_mass(); }
    json::Json edge_metrics() const override { return inner_->edge_metrics(); }
    bool settled() const override { return inner_->settled(); }
    std::vector<int> settling_on() const override { return inner_->settling_on(); }
    bool one_in_flight_per_edge() const override { return inner_->one_in_flight_per_edge(); }
    std::size_t unsent() const override { return inner_->unsent(); }
    std::string elastic_refusal() const override { return inner_->elastic_refusal(); }
    bool acts_on_edge_speeds() const override { return inner_->acts_on_edge_speeds(); }
    std::span<float> receive_into(const proto::Message& m) override {
        return inner_->receive_into(m);
    }
    std::span<const float> placed_values(const proto::Message& m) const override {
        return inner_->placed_values(m);
    }
    std::optional<NonFinite> first_non_finite_value(const proto::Message& m,
                                                    std::span<const float> v) const override {
        return inner_->first_non_finite_value(m, v);
    }
    bool compressed(const proto::Message& m) const override { return inner_->compressed(m); }
    /// Checkpoints are the inner protocol's: a layer that resumes saves its own part too.
    std::string resume_refusal() const override {
        return "a PassThrough layer does not checkpoint";
    }
    proto::Protocol& inner() { return *inner_; }

  protected:
    void on_start(proto::Time now, proto::Actions& out) override { inner_->start(now, out); }
    void on_step_finished(proto::Time now, double loss, proto::Actions& out) override {
        inner_->step_finished(now, loss, out);
    }
    void on_message(proto::Time now, proto::Message msg, proto::Actions& out) override {
        inner_->message_arrived(now, std::move(msg), out);
    }
    void on_send_completed(proto::Time now, std::uint64_t id, bool ok,
                           proto::Actions& out) override {
        inner_->send_completed(now, id, ok, out);
    }
    void on_deadline(proto::Time now, std::uint64_t id, proto::Actions& out) override {
        inner_->deadline_reached(now, id, out);
    }
    void on_peer_failed(proto::Time now, int rank, proto::Actions& out) override {
        inner_->peer_failed(now, rank, out);
    }

  private:
    std::unique_ptr<proto::Protocol> inner_;
};

/// The ProtocolLayer that wraps every peer's protocol in a PassThrough.
inline ProtocolLayer pass_through() {
    return [](std::unique_ptr<proto::Protocol> inner, const proto::PeerContext& ctx) {
        return std::make_unique<PassThrough>(std::move(inner), ctx);
    };
}

}  // namespace gossamer::testing
