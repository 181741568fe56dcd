#include "gossamer/optimizers/outer/streaming_worker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gossamer/core/error.hpp"

namespace gossamer::optim {

namespace {

// The fragments of `o` over a model of `size` values: equal slices, or the config's partitions.
PartitionLayout fragment_layout(const OuterOptions& o, std::size_t size,
                                const PartitionLayout* layout, const std::string& config_file) {
    if (o.fragments_are_partitions) {
        if (!layout)
            throw ConfigError(config_file, "outer.fragments",
                              "\"partitions\" fragments need the model's partitions, and this "
                              "run has no model (cost mode)",
                              "give a number of equal slices, e.g. \"fragments\": 4");
        if (static_cast<std::int64_t>(layout->count()) != o.fragments)
            throw ConfigError(config_file, "outer.fragments",
                              fmt::format("{} fragments were counted in the config, the model has "
                                          "{} partitions ({})",
                                          o.fragments, layout->count(), layout->describe()),
                              "give every partition of \"partitions\" at least one layer");
        return *layout;
    }
    if (o.fragments < 1 || static_cast<std::uint64_t>(o.fragments) > size)
        throw ConfigError(config_file, "outer.fragments",
                          fmt::format("{} fragments of a model of {} values", o.fragments, size),
                          "use at most one fragment per value, e.g. 4");
    return equal_fragments(size, o.fragments);
}

// Fragment p gossips on sub-rounds r with r % k == p: period k, due k - 1 - p steps early.
Multirate fragment_rates(PartitionLayout layout) {
    const auto k = static_cast<int>(layout.count());
    std::vector<PartitionRate> rates(layout.count());
    for (int p = 0; p < k; ++p) {
        rates[static_cast<std::size_t>(p)].gossip_period = k;
        rates[static_cast<std::size_t>(p)].gossip_offset = k - 1 - p;
    }
    return Multirate(std::move(layout), std::move(rates), BackwardMode::full);
}

}  // namespace

PartitionLayout equal_fragments(std::size_t size, std::int64_t k) {
    const auto n = static_cast<std::size_t>(k);
    std::vector<Partition> parts;
    std::size_t at = 0;
    for (std::size_t p = 0; p < n; ++p) {
        const std::size_t len = size / n + (p < size % n ? 1 : 0);
        parts.push_back({fmt::format("fragment{}", p), at, len});
        at += len;
    }
    return PartitionLayout(std::move(parts), size);
}

StreamingWorker::StreamingWorker(proto::LocalWorker& inner, OuterOptions options,
                                 std::int64_t inner_steps, const PartitionLayout* layout,
                                 const std::string& config_file)
    : inner_(inner),
      outer_(inner, options, inner_steps, layout, config_file),
      rates_(fragment_rates(fragment_layout(options, inner.size(), layout, config_file))),
      inner_total_(inner_steps) {
    check_outer_values(options, config_file, "outer.");  // the config's and Peer's checks
    if (inner_.math()) delta_.resize(inner_.size());
}

std::int64_t StreamingWorker::steps_per_gradient() const {
    const std::int64_t left = inner_total_ - inner_.steps();
    return std::clamp<std::int64_t>(left, 1, options().step_inner_steps());
}

double StreamingWorker::compute_gradient(std::span<const float> at) {
    const std::int64_t n = steps_per_gradient();
    if (!inner_.math()) {
        for (std::int64_t s = 0; s < n; ++s) {
            inner_.compute_gradient({});
            inner_.apply_gradient({}, {});
        }
        return 0.0;
    }
    const auto k = static_cast<std::int64_t>(rates_.count());
    if (y_.empty()) {
        y_.assign(at.begin(), at.end());  // the first sub-round starts at the anchors
    } else if (const std::int64_t synced = sub_rounds_ - 1 - options().overlap; synced >= 0) {
        // The fragment whose Delta was taken at the end of sub-round `synced` has its new anchor
        // in `at` now: merge it (Streaming DiLoCo's alpha).
        const Partition& q = rates_.layout()[static_cast<std::size_t>(synced % k)];
        const auto a = static_cast<float>(options().alpha);
        if (a == 0.0f) {
            std::copy(at.begin() + q.offset, at.begin() + q.end(), y_.begin() + q.offset);
        } else {
            for (std::size_t i = q.offset; i < q.end(); ++i) y_[i] = a * y_[i] + (1.0f - a) * at[i];
        }
    }
    double sum = 0;
    for (std::int64_t s = 0; s < n; ++s) {
        const double loss = inner_.compute_gradient(y_);
        if (!std::isfinite(loss)) return loss;  // the protocol stops the peer (Diverged)
        inner_.apply_gradient(y_, inner_.gradient());
        sum += loss;
    }
    // Delta of the fragment due now, against its last agreed anchor; 0 elsewhere.
    std::fill(delta_.begin(), delta_.end(), 0.0f);
    const Partition& p = rates_.layout()[static_cast<std::size_t>(sub_rounds_ % k)];
    for (std::size_t i = p.offset; i < p.end(); ++i) delta_[i] = at[i] - y_[i];
    return sum / static_cast<double>(n);
}

void StreamingWorker::apply_gradient(std::span<float> x, std::span<const float> g) {
    const auto k = static_cast<std::int64_t>(rates_.count());
    const Partition& p = rates_.layout()[static_cast<std::size_t>(sub_rounds_ % k)];
    // delayed_nesterov counts each fragment's own syncs: this is its (sub_rounds_ / k + 1)-th.
    const bool due = (sub_rounds_ / k + 1) % options().delay == 0;
    ++sub_rounds_;
    outer_.step_range(x, g, p.offset, p.end(), due);
}

void StreamingWorker::save_state(StateWriter& w) const {
    outer_.save_state(w);
    w.tag("streaming");
    w.i64(sub_rounds_);
    w.floats(y_);
}

void StreamingWorker::restore_state(StateReader& r) {
    outer_.restore_state(r);
    r.tag("streaming");
    sub_rounds_ = r.counter("streaming sub-rounds");
    y_ = r.floats("streaming inner point");
    if (!y_.empty() && y_.size() != inner_.size())
        r.fail(fmt::format("a streaming inner point of {} values for a model of {}", y_.size(),
                           inner_.size()));
}

void StreamingWorker::enter_at(std::int64_t sub_round) {
    sub_rounds_ = sub_round;
    y_.clear();  // starts at the anchors it is given
    inner_.enter_at(std::min(sub_round * options().step_inner_steps(), inner_total_));
}

std::unique_ptr<proto::LocalWorker> make_outer_layer(proto::LocalWorker& inner,
                                                     const OuterOptions& options,
                                                     std::int64_t inner_steps,
                                                     const PartitionLayout* layout,
                                                     const std::string& config_file) {
    if (options.streaming())
        return std::make_unique<StreamingWorker>(inner, options, inner_steps, layout, config_file);
    return std::make_unique<OuterWorker>(inner, options, inner_steps, layout, config_file);
}

const OuterOptions* outer_options_of(const proto::LocalWorker& w) {
    if (const auto* o = dynamic_cast<const OuterWorker*>(&w)) return &o->options();
    if (const auto* s = dynamic_cast<const StreamingWorker*>(&w)) return &s->options();
    return nullptr;
}

}  // namespace gossamer::optim
