#include "gossamer/sim/fair_network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "gossamer/core/error.hpp"

namespace gossamer::sim {

FairNetwork::FairNetwork(const Cluster& cluster) : n_(cluster.n()), cluster_(cluster) {
    if (n_ == 0) throw Error("FairNetwork: the cluster has no peers");
    const std::size_t racks = cluster_.racks.size();
    resources_.resize(static_cast<std::size_t>(2 * n_) + 2 * racks);
    for (int i = 0; i < n_; ++i) {
        resources_[static_cast<std::size_t>(i)].capacity = cluster_.peers[i].uplink;
        resources_[static_cast<std::size_t>(n_ + i)].capacity = cluster_.peers[i].downlink;
    }
    // Rack j's uplink is resource 2n + 2j, its downlink 2n + 2j + 1.
    for (std::size_t j = 0; j < racks; ++j) {
        resources_[static_cast<std::size_t>(2 * n_) + 2 * j].capacity = cluster_.racks[j].uplink;
        resources_[static_cast<std::size_t>(2 * n_) + 2 * j + 1].capacity =
            cluster_.racks[j].downlink;
    }
}

std::array<int, 5> FairNetwork::path(const Flow& f) const {
    return {f.from, n_ + f.to, f.link, f.rack_up, f.rack_down};
}

void FairNetwork::check_rank(int rank) const {
    if (rank < 0 || rank >= n_)
        throw Error(fmt::format("FairNetwork: rank {} is out of range for {} peers", rank, n_));
}

int FairNetwork::link_resource(int from, int to) {
    // Every flow of a link also crosses the sender's uplink and the receiver's downlink, so a
    // link cap at or above either can never bind: such links need no resource (the lab makes
    // no htb class for them either, docs/operations/lab.md).
    // The endpoints' capacities are their resources' (no PeerSpec read per flow), and without
    // link overrides every link is the default one (no map search either).
    const double cap = cluster_.links.empty() ? cluster_.default_link.bandwidth
                                              : cluster_.link(from, to).bandwidth;
    if (cap >= std::min(resources_[static_cast<std::size_t>(from)].capacity,
                        resources_[static_cast<std::size_t>(n_ + to)].capacity))
        return -1;
    const std::uint64_t key = static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(n_) +
                              static_cast<std::uint64_t>(to);
    auto [it, fresh] = links_.try_emplace(key, static_cast<int>(resources_.size()));
    if (fresh) {
        resources_.emplace_back();
        resources_.back().capacity = cap;
    }
    return it->second;
}

void FairNetwork::touch(int resource) {
    if (resource < 0) return;
    Resource& r = resources_[static_cast<std::size_t>(resource)];
    if (r.dirty == reshare_mark_) return;
    r.dirty = reshare_mark_;
    dirty_.push_back(resource);
}

std::uint32_t FairNetwork::start(int from, int to, std::uint64_t bytes, Time now) {
    check_rank(from);
    check_rank(to);
    if (from == to) throw Error(fmt::format("FairNetwork: peer {} sends to itself", from));
    std::uint32_t id = 0;
    if (free_.empty()) {
        id = static_cast<std::uint32_t>(flows_.size());
        flows_.emplace_back();
    } else {
        id = free_.back();
        free_.pop_back();
    }
    Flow& f = flows_[id];
    const std::uint32_t version = f.version + 1;
    f = Flow{};
    f.from = from;
    f.to = to;
    f.remaining = static_cast<double>(bytes);
    f.last = f.end = now;
    f.version = version;
    f.active = true;
    ++in_flight_;
    if (bytes == 0) {  // takes no capacity: ends at once
        zero_.push_back(id);
        return id;
    }
    f.link = link_resource(from, to);
    if (cluster_.crosses_racks(from, to)) {
        if (const int a = cluster_.rack(from); a >= 0) f.rack_up = 2 * n_ + 2 * a;
        if (const int b = cluster_.rack(to); b >= 0) f.rack_down = 2 * n_ + 2 * b + 1;
    }
    f.attached = true;
    for (int r : path(f)) {
        if (r < 0) continue;
        resources_[static_cast<std::size_t>(r)].flows.push_back(id);
        touch(r);
    }
    return id;
}

bool FairNetwork::current(std::uint32_t flow, std::uint32_t version) const {
    return flow < flows_.size() && flows_[flow].active && flows_[flow].version == version;
}

void FairNetwork::finish(std::uint32_t flow, Time) {
    if (flow >= flows_.size() || !flows_[flow].active)
        throw Error(fmt::format("FairNetwork: flow {} is not in flight", flow));
    Flow& f = flows_[flow];
    f.active = false;
    ++f.version;  // any update still queued for it is stale
    --in_flight_;
    free_.push_back(flow);
    if (!f.attached) return;
    for (int r : path(f)) {
        if (r < 0) continue;
        auto& list = resources_[static_cast<std::size_t>(r)].flows;
        auto it = std::find(list.begin(), list.end(), flow);
        *it = list.back();
        list.pop_back();
        touch(r);
    }
    f.attached = false;
}

double FairNetwork::rate_of(std::uint32_t flow) const {
    if (flow >= flows_.size() || !flows_[flow].active)
        throw Error(fmt::format("FairNetwork: flow {} is not in flight", flow));
    return flows_[flow].rate;
}

namespace {

// Relative change of a rate below which it counts as unchanged: floating-point noise of the
// filling must not spread a reshare over flows whose rates did not move.
constexpr double kSame = 1e-9;

bool moved(double before, double after) {
    return !(std::abs(after - before) <= kSame * before);
}

}  // namespace

void FairNetwork::admit(std::uint32_t id) {
    Flow& f = flows_[id];
    if (f.in == reshare_mark_) return;
    f.in = reshare_mark_;
    admitted_.push_back(id);
}

void FairNetwork::fill() {
    // Progressive filling: raise every admitted flow's rate together; the resource whose
    // capacity left per unfixed flow is least saturates first and fixes its flows' rates. The
    // flows not admitted keep their rates and hold their share of every resource. A min-heap of
    // (share, resource) with stale entries skipped: O(F log R) over the admitted flows.
    ++pass_mark_;
    touched_.clear();
    for (std::uint32_t id : admitted_) {
        const Flow& f = flows_[id];
        for (int r : path(f)) {
            if (r < 0) continue;
            Resource& res = resources_[static_cast<std::size_t>(r)];
            if (res.mark != pass_mark_) {
                res.mark = pass_mark_;
                res.left = res.capacity;
                res.unfrozen = 0;
                touched_.push_back(r);
            }
            ++res.unfrozen;
        }
    }
    heap_.clear();
    const auto share_of = [](const Resource& r) {
        return std::max(r.left, 0.0) / static_cast<double>(r.unfrozen);
    };
    for (int r : touched_) {
        Resource& res = resources_[static_cast<std::size_t>(r)];
        for (std::uint32_t id : res.flows)
            if (flows_[id].in != reshare_mark_) res.left -= flows_[id].rate;
        heap_.emplace_back(share_of(res), r);
    }
    std::make_heap(heap_.begin(), heap_.end(), std::greater<>{});
    std::size_t open = admitted_.size();
    while (open > 0 && !heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
        const auto [share, r] = heap_.back();
        heap_.pop_back();
        Resource& res = resources_[static_cast<std::size_t>(r)];
        if (res.unfrozen == 0 || share_of(res) != share) continue;  // stale entry
        for (std::uint32_t id : res.flows) {
            Flow& f = flows_[id];
            if (f.in != reshare_mark_ || f.frozen == pass_mark_) continue;
            f.frozen = pass_mark_;
            f.next = share;
            f.bottleneck = r;
            --open;
            for (int o : path(f)) {
                if (o < 0) continue;
                Resource& other = resources_[static_cast<std::size_t>(o)];
                other.left -= share;
                if (--other.unfrozen > 0 && o != r) {
                    heap_.emplace_back(share_of(other), o);
                    std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
                }
            }
        }
    }
}

bool FairNetwork::widen() {
    // The fill is the max-min fair allocation when every flow has a bottleneck: a saturated
    // resource on which no flow is faster than it. Flows not admitted had one before and keep
    // it if no admitted flow on their resources changed rate; an admitted flow has the resource
    // that fixed it, if no flow held at its old rate is faster there. Where either fails, the
    // flows held there are admitted and the fill runs again: at worst over the whole connected
    // component, usually over a few flows around the change.
    bool grew = false;
    const std::size_t count = touched_.size();
    for (std::size_t i = 0; i < count; ++i) {
        const Resource& res = resources_[static_cast<std::size_t>(touched_[i])];
        bool wronged = false, held = false;
        double fixed_here = std::numeric_limits<double>::infinity();
        for (std::uint32_t id : res.flows) {
            const Flow& f = flows_[id];
            if (f.in != reshare_mark_) {
                held = true;
                continue;
            }
            if (!f.attached || f.rate == 0 || moved(f.rate, f.next)) wronged = true;
            if (f.bottleneck == touched_[i]) fixed_here = std::min(fixed_here, f.next);
        }
        if (!held) continue;
        if (!wronged)
            for (std::uint32_t id : res.flows)
                if (flows_[id].in != reshare_mark_ && flows_[id].rate > fixed_here * (1 + kSame))
                    wronged = true;
        if (!wronged) continue;
        for (std::uint32_t id : res.flows) admit(id);
        grew = true;
    }
    return grew;
}

void FairNetwork::settle(Time now, std::vector<Update>& changed) {
    for (std::uint32_t id : zero_)
        if (flows_[id].active) changed.push_back({id, flows_[id].version, now});
    zero_.clear();
    admitted_.clear();
    // Every flow that shares a resource with a change is admitted: their shares moved.
    for (int r : dirty_)
        for (std::uint32_t id : resources_[static_cast<std::size_t>(r)].flows) admit(id);
    dirty_.clear();
    if (!admitted_.empty()) {
        do fill();
        while (widen());
    }

    // Bytes moved at the old rate until now and move at the new one from now on.
    for (std::uint32_t id : admitted_) {
        Flow& f = flows_[id];
        if (f.rate != 0 && !moved(f.rate, f.next)) continue;  // its end stands
        f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.last));
        f.last = now;
        f.rate = f.next;
        ++f.version;
        f.end = now + f.remaining / f.rate;
        changed.push_back({id, f.version, f.end});
    }
    ++reshare_mark_;  // a new set of admitted flows and dirty resources
}

}  // namespace gossamer::sim
