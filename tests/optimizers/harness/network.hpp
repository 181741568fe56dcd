#pragma once
/// N peers of one protocol that a test builds and keeps (Network), and the helpers the gossip
/// tests share: averages, disagreement, host copies of device vectors. Network::harness() drives
/// them with the one harness (harness.hpp).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/protocol/device.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"
#include "gossamer/topology/schedule.hpp"
#include "optimizers/harness/harness.hpp"
#include "optimizers/harness/workers.hpp"

namespace gossamer::testing {

// The protocol names the gossip tests use unqualified (with `using namespace gossamer::testing`).
using proto::Actions;
using proto::LocalWorker;
using proto::Message;
using proto::PeerContext;
using proto::Protocol;

/// A host copy of v, which is device memory when the worker has a device.
inline std::vector<float> host_copy(const proto::LocalWorker& w, std::span<const float> v) {
    std::vector<float> out(v.size());
    if (w.device()) {
        w.device()->download(out, v.data());
    } else {
        std::copy(v.begin(), v.end(), out.begin());
    }
    return out;
}

/// A protocol's make_<name>(options, ctx).
using Factory =
    std::function<std::unique_ptr<proto::Protocol>(const json::Node*, proto::PeerContext)>;

/// N peers of one protocol, each over its own worker.
struct Network {
    std::vector<std::unique_ptr<proto::LocalWorker>> workers;
    std::vector<std::unique_ptr<proto::Protocol>> peers;

    int n() const { return static_cast<int>(peers.size()); }
    std::vector<proto::Protocol*> protocols() const {
        std::vector<proto::Protocol*> v;
        for (const auto& p : peers) v.push_back(p.get());
        return v;
    }
    std::vector<proto::LocalWorker*> locals() const {
        std::vector<proto::LocalWorker*> v;
        for (const auto& w : workers) v.push_back(w.get());
        return v;
    }
    template <typename P>
    P& at(int i) const {
        return dynamic_cast<P&>(*peers[static_cast<std::size_t>(i)]);
    }
    /// The models peers report (current_model), as doubles.
    std::vector<std::vector<double>> models(const std::vector<bool>& only = {}) const {
        std::vector<std::vector<double>> out;
        for (int i = 0; i < n(); ++i) {
            if (!only.empty() && !only[static_cast<std::size_t>(i)]) continue;
            std::vector<float> m(workers[static_cast<std::size_t>(i)]->size());
            peers[static_cast<std::size_t>(i)]->current_model(m);
            out.emplace_back(m.begin(), m.end());
        }
        return out;
    }
    /// The harness over these peers; by default in virtual seconds (the gossip tests' clock).
    Harness harness(HarnessOptions options = seconds_clock()) const {
        return Harness(protocols(), locals(), std::move(options));
    }
};

/// Builds n peers over `schedule` with workers from make_worker(rank).
inline Network make_network(
    std::shared_ptr<const topology::Schedule> schedule, std::int64_t max_steps,
    const Factory& factory, const json::Node* options,
    const std::function<std::unique_ptr<proto::LocalWorker>(int)>& make_worker) {
    Network net;
    const int n = schedule->n();
    for (int i = 0; i < n; ++i) {
        net.workers.push_back(make_worker(i));
        proto::PeerContext ctx{i, n, schedule, net.workers.back().get(), max_steps};
        net.peers.push_back(factory(options, ctx));
    }
    return net;
}

inline std::vector<double> mean_of(const std::vector<std::vector<double>>& xs) {
    std::vector<double> m(xs.front().size(), 0.0);
    for (const auto& x : xs)
        for (std::size_t k = 0; k < m.size(); ++k) m[k] += x[k] / static_cast<double>(xs.size());
    return m;
}

/// sqrt(sum_i |x_i - mean|^2).
inline double disagreement(const std::vector<std::vector<double>>& xs) {
    const auto m = mean_of(xs);
    double s = 0;
    for (const auto& x : xs)
        for (std::size_t k = 0; k < m.size(); ++k) s += (x[k] - m[k]) * (x[k] - m[k]);
    return std::sqrt(s);
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double d = 0;
    for (std::size_t k = 0; k < a.size(); ++k) d = std::max(d, std::abs(a[k] - b[k]));
    return d;
}

}  // namespace gossamer::testing
