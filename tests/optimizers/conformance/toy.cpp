// The toy push-sum protocol and its flaws (toy.hpp).
#include "optimizers/conformance/toy.hpp"

#include <fmt/format.h>

#include <map>
#include <utility>
#include <vector>

#include "gossamer/core/error.hpp"

namespace gossamer::conformance {

namespace {

using proto::Actions;
using proto::Message;
using proto::Time;

std::uint64_t g_sends = 0;  // Flaw::random: a process-wide counter

class Toy final : public proto::Protocol {
  public:
    Toy(proto::PeerContext ctx, Flaw flaw)
        : Protocol(std::move(ctx)),
          flaw_(flaw),
          z_(worker().size()),
          next_((rank() + 1) % n()),
          prev_((rank() + n() - 1) % n()) {}

    std::string_view name() const override { return "toy"; }
    std::span<const float> compute_point() override { return z_; }
    void current_model(std::span<float> out) const override {
        const auto x = context().worker->params();
        for (std::size_t k = 0; k < out.size(); ++k) out[k] = static_cast<float>(x[k] / w_);
    }
    double mass() const override { return w_; }
    double held_mass() const override {
        double m = w_;
        for (const auto& [round, share] : inbox_) m += share.second;
        return m;
    }
    std::string resume_refusal() const override { return ""; }

  protected:
    void on_start(Time, Actions& out) override {
        if (n() == 1 || context().max_steps == 0) {
            out.done = true;
            return;
        }
        begin_step(out);
    }

    void on_step_finished(Time now, double, Actions& out) override {
        auto x = params();
        worker().apply_gradient(x, worker().gradient());
        Message m;
        m.kind = proto::MessageKind::mass_share;
        m.receiver = next_;
        m.round = steps_;
        m.edge_seq = static_cast<std::uint64_t>(steps_);
        m.sent_at = now;
        m.elements = x.size();
        m.payload.resize(x.size());
        // Even ranks send half, odd ranks a quarter (dyadic: every sum of weights is exact).
        const float share = rank() % 2 == 0 ? 0.5f : 0.25f;
        for (std::size_t k = 0; k < x.size(); ++k) {
            m.payload[k] = share * x[k];
            x[k] -= m.payload[k];
        }
        if (flaw_ == Flaw::random) m.payload[0] += 1e-3f * static_cast<float>(g_sends++ % 7);
        m.weight = share * w_;
        w_ -= m.weight;
        if (flaw_ == Flaw::leaks_mass) m.weight *= 0.5;
        send(out, std::move(m));
        ++steps_;
        advance(out);
    }

    void on_message(Time, Message msg, Actions& out) override {
        if (msg.sender != prev_ || msg.kind != proto::MessageKind::mass_share) return;
        if (stepping() && flaw_ == Flaw::scribbles) {
            absorb(msg.payload, msg.weight);  // into x while the step runs
            ++heard_;
            return;
        }
        float factor = 1.0f;  // Flaw::reads_gradient: from the buffer the compute side owns
        if (stepping() && flaw_ == Flaw::reads_gradient) factor += 0.0f * worker().gradient()[0];
        for (float& v : msg.payload) v *= factor;
        inbox_[msg.round] = {std::move(msg.payload), msg.weight};
        if (!stepping()) advance(out);
    }

    void on_peer_failed(Time, int dead, Actions& out) override {
        if (dead != prev_ || flaw_ == Flaw::waits_forever) return;
        prev_dead_ = true;
        if (!stepping()) advance(out);
    }

    void save_state(StateWriter& w) const override {
        w.f64(w_);
        w.i64(flaw_ == Flaw::cuts_early ? steps_ : heard_);  // counts the round it has not taken
    }
    void restore_state(StateReader& r) override {
        w_ = r.f64("toy weight");
        heard_ = r.i64("toy shares heard");
        steps_ = context().worker->steps();
    }

  private:
    void absorb(std::span<const float> values, double weight) {
        auto x = context().worker->params();
        for (std::size_t k = 0; k < x.size(); ++k) x[k] += values[k];
        w_ += weight;
    }

    // Between steps: absorb the shares of earlier rounds (every one once done), then start the
    // next step once round steps_ - 1 is in, and cut a checkpoint there.
    void advance(Actions& out) {
        const bool last_in = !inbox_.empty() && inbox_.begin()->first == steps_ - 1;
        if (flaw_ == Flaw::cuts_early && !done() && steps_ < context().max_steps &&
            (last_in || heard_ >= steps_ || prev_dead_))
            cut(steps_);  // before the round's shares are in x and w
        for (auto it = inbox_.begin(); it != inbox_.end();) {
            if (it->first >= steps_ && !done()) break;
            absorb(it->second.first, it->second.second);
            ++heard_;
            it = inbox_.erase(it);
        }
        if (done()) return;
        if (steps_ >= context().max_steps) {
            out.done = true;
            return;
        }
        if (heard_ < steps_ && !prev_dead_) return;
        if (flaw_ != Flaw::cuts_early) cut(steps_);
        begin_step(out);
    }

    void begin_step(Actions& out) {
        const auto x = context().worker->params();
        for (std::size_t k = 0; k < x.size(); ++k) z_[k] = static_cast<float>(x[k] / w_);
        out.start_step = true;
    }

    Flaw flaw_;
    std::vector<float> z_;
    std::map<std::int64_t, std::pair<std::vector<float>, double>> inbox_;  // by round
    double w_ = 1.0;
    int next_, prev_;
    bool prev_dead_ = false;
    std::int64_t steps_ = 0, heard_ = 0;
};

const char* flaw_name(Flaw f) {
    switch (f) {
        case Flaw::none:
            return "toy";
        case Flaw::scribbles:
            return "toy that scribbles on x";
        case Flaw::reads_gradient:
            return "toy that reads the gradient during a step";
        case Flaw::random:
            return "toy with a process-wide counter";
        case Flaw::leaks_mass:
            return "toy that leaks mass";
        case Flaw::waits_forever:
            return "toy that waits for a failed peer";
        case Flaw::lax_options:
            return "toy that accepts any options";
        case Flaw::cuts_early:
            return "toy that cuts before it takes the round's shares";
    }
    return "toy";
}

}  // namespace

Candidate toy(Flaw flaw) {
    return {flaw_name(flaw), [flaw](const json::Node* options, proto::PeerContext ctx) {
                if (options && flaw != Flaw::lax_options) options->expect_object({});
                return std::make_unique<Toy>(std::move(ctx), flaw);
            }};
}

}  // namespace gossamer::conformance
