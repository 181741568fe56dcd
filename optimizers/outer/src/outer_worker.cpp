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

std::int64_t OuterWorker::steps_per_gradient() const {
    const std::int64_t left = inner_total_ - inner_.steps();
    return std::clamp<std::int64_t>(left, 1, options_.steps);
}

double OuterWorker::compute_gradient(std::span<const float> at) {
    const std::int64_t k = steps_per_gradient();
    if (!inner_.math()) {
        for (std::int64_t s = 0; s < k; ++s) {
            inner_.compute_gradient({});
            inner_.apply_gradient({}, {});
        }
        return 0.0;
    }
    std::copy(at.begin(), at.end(), y_.begin());
    double sum = 0;
    for (std::int64_t s = 0; s < k; ++s) {
        const double loss = inner_.compute_gradient(y_);
        if (!std::isfinite(loss)) return loss;  // the protocol stops the peer (Diverged)
        inner_.apply_gradient(y_, inner_.gradient());
        sum += loss;
    }
    for (std::size_t i = 0; i < delta_.size(); ++i) delta_[i] = at[i] - y_[i];
    return sum / static_cast<double>(k);
}

void OuterWorker::outer_step(std::span<float> x, std::span<const float> g, std::size_t begin,
                             std::size_t end) {
    const auto lr = static_cast<float>(options_.lr);
    const auto mu = static_cast<float>(options_.momentum);
    if (mu == 0.0f) {
        for (std::size_t i = begin; i < end; ++i) x[i] -= lr * g[i];
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
    std::size_t at = 0;
    for (const auto& [begin, end] : outer_ranges_) {
        for (std::size_t i = at; i < begin; ++i) x[i] -= g[i];  // local SGD outside
        outer_step(x, g, begin, end);
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
    m_ = r.floats("outer momentum");
    if (!m_.empty() && m_.size() != inner_.size())
        r.fail(
            fmt::format("outer momentum of {} values for a model of {}", m_.size(), inner_.size()));
}

void OuterWorker::enter_at(std::int64_t round) {
    rounds_ = round;
    inner_.enter_at(std::min(round * options_.steps, inner_total_));
}

void OuterWorker::step_range(std::span<float> x, std::span<const float> g, std::size_t begin,
                             std::size_t end) {
    if (!inner_.math() || x.empty()) return;
    std::size_t at = begin;
    for (const auto& [b, e] : outer_ranges_) {
        const std::size_t lo = std::max(b, begin), hi = std::min(e, end);
        if (lo >= hi) continue;
        for (std::size_t i = at; i < lo; ++i) x[i] -= g[i];  // local SGD outside
        outer_step(x, g, lo, hi);
        at = hi;
    }
    for (std::size_t i = at; i < end; ++i) x[i] -= g[i];
}

}  // namespace gossamer::optim
