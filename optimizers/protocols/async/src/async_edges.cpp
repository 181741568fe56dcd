// async's per-neighbour view for drivers and tests (async_gossip.hpp, AsyncEdge): the protocol
// keeps its neighbours narrower (Neighbour), so edge() and edges() build the public form.
#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocols/async/async_gossip.hpp"

namespace gossamer::proto {

AsyncEdge AsyncGossip::view(const Neighbour& nb) {
    AsyncEdge e;
    e.peer = nb.peer;
    e.out = nb.out;
    e.in = nb.in;
    e.failed = nb.failed;
    e.finished = nb.finished;
    e.absent = nb.absent;
    e.leaving = nb.leaving;
    e.final_shares = nb.final_shares;
    e.rate = nb.rate;
    e.reported_self = nb.reported_self;
    e.reports = nb.reports;
    e.pushes = nb.pushes;
    e.last_push = nb.last_push;
    e.last_fraction = nb.last_fraction;
    e.weight_sent = nb.weight_sent;
    e.shares = nb.shares;
    e.weight_received = nb.weight_received;
    e.absorbed = nb.absorbed;
    e.staleness_max = nb.staleness_max;
    // As the running mean was: the sum over the count, after each absorption.
    if (nb.absorbed > 0)
        e.staleness_mean = static_cast<double>(nb.staleness_sum) / static_cast<double>(nb.absorbed);
    e.deadline = nb.deadline;
    e.late = nb.late;
    e.late_now = nb.late_now;
    return e;
}

std::vector<AsyncEdge> AsyncGossip::edges() const {
    std::vector<AsyncEdge> v;
    v.reserve(nbrs_.size());
    for (const auto& [j, nb] : nbrs_) v.push_back(view(nb));
    return v;
}

json::Json AsyncGossip::edge_metrics() const {
    json::Json out = json::Json::array();
    for (const AsyncEdge& e : edges())
        out.push_back({{"peer", e.peer},
                       {"out", e.out},
                       {"in", e.in},
                       {"rate", e.rate},
                       {"reported_self", e.reported_self},
                       {"reports", e.reports},
                       {"pushes", e.pushes},
                       {"last_fraction", e.last_fraction},
                       {"weight_sent", e.weight_sent},
                       {"shares", e.shares},
                       {"weight_received", e.weight_received},
                       {"staleness_max", e.staleness_max},
                       {"staleness_mean", e.staleness_mean},
                       {"deadline", e.deadline},
                       {"late", e.late}});
    return out;
}

const AsyncGossip::Neighbour& AsyncGossip::known(int peer) const {
    auto it = nbrs_.find(peer);
    if (it == nbrs_.end())
        throw Error(fmt::format("async: peer {} is not a neighbour of {}", peer, rank()));
    return it->second;
}

AsyncEdge AsyncGossip::edge(int peer) const {
    return view(known(peer));
}

}  // namespace gossamer::proto
