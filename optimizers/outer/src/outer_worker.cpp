#include "gossamer/optimizers/outer/outer_worker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gossamer/core/error.hpp"

namespace gossamer::optim {

OuterWorker::OuterWorker(proto::LocalWorker& inner, OuterOptions options, std::int64_t inner_steps,
                         const PartitionLayout* layout, const std::string& config_file)
    : inner_(inner), options_(std::move(options)), inner_total_(inner_steps) {
    if (inner_.device())
        throw ConfigError(config_file, "outer",
                          "the outer layer keeps its vectors in host memory, and this peer's "
                          "model lives on a device",
                          "drop \"outer\" or train on the host");
    if (inner_.multirate())
        throw ConfigError(config_file, "outer",
                          "multirate partitions cannot be combined with outer rounds yet",
                          "drop \"multirate\" or \"outer\"");
    if (options_.partitions.empty()) {
        outer_ranges_.emplace_back(0, inner_.size());
    } else {
        check_outer_partitions(options_, layout, config_file);
        for (const std::string& name : options_.partitions) {
            const Partition& p = (*layout)[*layout->find(name)];
            outer_ranges_.emplace_back(p.offset, p.end());
        }
        std::sort(outer_ranges_.begin(), outer_ranges_.end());
    }
    if (inner_.math()) {
        y_.resize(inner_.size());
        delta_.resize(inner_.size());
    }
}

void OuterWorker::set_inner_rates(std::function<double(std::int64_t)> lr_at, double momentum,
                                  double data_weight) {
    lr_at_ = std::move(lr_at);
    inner_momentum_ = momentum;
    data_weight_ = data_weight;
}

double OuterWorker::round_seconds() const {
    if (!options_.timed()) return 0.0;
    // The last round is the job's remainder of reference_steps, and as much shorter in time.
    const std::int64_t ref = options_.reference_steps;
    const std::int64_t left = inner_total_ - computed_ * ref;
    return left >= ref || left <= 0
               ? options_.seconds
               : options_.seconds * static_cast<double>(left) / static_cast<double>(ref);
}

std::int64_t OuterWorker::steps_per_gradient() const {
    if (options_.timed()) {
        const std::int64_t plan = planned_ > 0 ? planned_ : options_.reference_steps;
        return std::clamp<std::int64_t>(plan, 1, options_.max_round_steps());
    }
    const std::int64_t left = inner_total_ - inner_.steps();
    return std::clamp<std::int64_t>(left, 1, options_.steps);
}

double OuterWorker::effective_steps(std::int64_t first, std::int64_t k, std::int64_t span) const {
    // FedNova's ||a||_1 with the inner momentum mu kept across rounds (the inner optimizer's
    // state is never reset): in steady state each step moves the point by lr_j / (1 - mu) times
    // its gradient. FedNova's per-round factor (1 - mu^(k - j)) / (1 - mu) assumes a buffer
    // reset each round; here it overweights a slow peer (outer.md, "Rounds by time").
    double a = 0;
    for (std::int64_t j = 0; j < k; ++j) a += lr_at_ ? lr_at_(first + j * span / k) : 1.0;
    return a / (1 - inner_momentum_);
}

double OuterWorker::fednova_scale(std::int64_t round, std::int64_t k) const {
    if (options_.normalize == OuterNormalize::none) return 1.0;
    const std::int64_t ref = options_.reference_steps;
    const double mine = effective_steps(round * ref, k, ref);
    const double common = effective_steps(round * ref, ref, ref);
    return data_weight_ * (mine > 0 ? std::min(common / mine, options_.max_scale) : 1.0);
}

double OuterWorker::compute_gradient(std::span<const float> at) {
    const std::int64_t k = steps_per_gradient();
    const std::int64_t round = computed_++;
    planned_ = 0;
    const bool timed = options_.timed();
    const std::int64_t ref = options_.reference_steps;
    // Rounds by time: inner step j takes the schedule's rate at the job's pace (class comment).
    const auto pace = [&](std::int64_t j) {
        if (timed) inner_.set_schedule_step(round * ref + j * ref / k);
    };
    if (!inner_.math()) {
        for (std::int64_t s = 0; s < k; ++s) {
            inner_.compute_gradient({});
            pace(s);
            inner_.apply_gradient({}, {});
        }
        return 0.0;
    }
    std::copy(at.begin(), at.end(), y_.begin());
    double sum = 0;
    for (std::int64_t s = 0; s < k; ++s) {
        const double loss = inner_.compute_gradient(y_);
        if (!std::isfinite(loss)) return loss;  // the protocol stops the peer (Diverged)
        pace(s);
        inner_.apply_gradient(y_, inner_.gradient());
        sum += loss;
    }
    if (timed) {
        const auto f = static_cast<float>(fednova_scale(round, k));
        for (std::size_t i = 0; i < delta_.size(); ++i) delta_[i] = (at[i] - y_[i]) * f;
    } else {
        for (std::size_t i = 0; i < delta_.size(); ++i) delta_[i] = at[i] - y_[i];
    }
    return sum / static_cast<double>(k);
}

void OuterWorker::outer_step(std::span<float> x, std::span<const float> g, std::size_t begin,
                             std::size_t end, bool momentum_due) {
    const auto lr = static_cast<float>(options_.lr);
    const auto mu = static_cast<float>(options_.momentum);
    if (mu == 0.0f) {
        for (std::size_t i = begin; i < end; ++i) x[i] -= lr * g[i];
        return;
    }
    if (options_.kind == OuterKind::delayed_nesterov) {
        // Delayed Nesterov: plain steps, and every delay-th round the momentum takes the mean
        // of the buffered pseudo-gradients and the step is Nesterov's (delay 1: nesterov).
        if (m_.empty()) m_.assign(x.size(), 0.0f);
        if (buffer_.empty()) buffer_.assign(x.size(), 0.0f);
        const auto inv = 1.0f / static_cast<float>(options_.delay);
        for (std::size_t i = begin; i < end; ++i) {
            if (!momentum_due) {
                buffer_[i] += g[i];
                x[i] -= lr * g[i];
                continue;
            }
            m_[i] = mu * m_[i] + (buffer_[i] + g[i]) * inv;
            buffer_[i] = 0.0f;
            x[i] -= lr * (g[i] + mu * m_[i]);
        }
        return;
    }
    // torch.optim.SGD with dampening 0: the buffer starts as g (mu * 0 + g).
    if (m_.empty()) m_.assign(x.size(), 0.0f);
    for (std::size_t i = begin; i < end; ++i) {
        m_[i] = mu * m_[i] + g[i];
        x[i] -= options_.kind == OuterKind::nesterov ? lr * (g[i] + mu * m_[i]) : lr * m_[i];
    }
}

void OuterWorker::apply_gradient(std::span<float> x, std::span<const float> g) {
    ++rounds_;
    if (!inner_.math() || x.empty()) return;
    const bool due = rounds_ % options_.delay == 0;
    std::size_t at = 0;
    for (const auto& [begin, end] : outer_ranges_) {
        for (std::size_t i = at; i < begin; ++i) x[i] -= g[i];  // local SGD outside
        outer_step(x, g, begin, end, due);
        at = end;
    }
    for (std::size_t i = at; i < x.size(); ++i) x[i] -= g[i];
}

void OuterWorker::save_state(StateWriter& w) const {
    inner_.save_state(w);
    w.tag("outer");
    w.string(options_.describe());
    w.i64(rounds_);
    w.floats(m_);
    if (options_.kind == OuterKind::delayed_nesterov) w.floats(buffer_);
}

void OuterWorker::restore_state(StateReader& r) {
    inner_.restore_state(r);
    r.tag("outer");
    const std::string saved = r.string("outer options");
    if (saved != options_.describe())
        r.fail(
            fmt::format("it was written with outer {}, this job has {}; resume with the "
                        "config it was written with",
                        saved, options_.describe()));
    rounds_ = r.counter("outer rounds");
    computed_ = rounds_;
    m_ = r.floats("outer momentum");
    if (!m_.empty() && m_.size() != inner_.size())
        r.fail(
            fmt::format("outer momentum of {} values for a model of {}", m_.size(), inner_.size()));
    if (options_.kind != OuterKind::delayed_nesterov) return;
    buffer_ = r.floats("delayed Nesterov buffer");
    if (!buffer_.empty() && buffer_.size() != inner_.size())
        r.fail(fmt::format("delayed Nesterov buffer of {} values for a model of {}", buffer_.size(),
                           inner_.size()));
}

void OuterWorker::enter_at(std::int64_t round) {
    rounds_ = computed_ = round;
    inner_.enter_at(std::min(round * options_.round_steps(), inner_total_));
}

}  // namespace gossamer::optim
