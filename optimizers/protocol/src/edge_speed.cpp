#include "gossamer/optimizers/protocol/edge_speed.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::proto {

EdgeSpeeds::EdgeSpeeds(EdgeSpeedOptions options) {
    configure(options);
}

void EdgeSpeeds::configure(const EdgeSpeedOptions& options) {
    if (!(options.alpha > 0) || options.alpha > 1)
        throw Error(fmt::format("edge speeds: alpha {} is outside (0, 1]", options.alpha));
    if (options.small_bytes >= options.large_bytes)
        throw Error("edge speeds: small_bytes must be below large_bytes");
    options_ = options;
}

EdgeSpeed& EdgeSpeeds::edge(int to) {
    EdgeSpeed& e = edges_[to];
    e.peer = to;
    return e;
}

void EdgeSpeeds::posted(std::uint64_t id, int to, std::uint64_t bytes, double at) {
    if (!options_.measure) return;
    // Ids grow, so this is an append; a driver that reuses one would be a bug elsewhere.
    if (!pending_.empty() && pending_.back().id >= id)
        throw Error(fmt::format("edge speeds: send id {} after {}", id, pending_.back().id));
    pending_.push_back({id, to, bytes, at});
}

void EdgeSpeeds::handed_over(std::uint64_t id, double at) {
    const auto it = std::lower_bound(pending_.begin(), pending_.end(), id,
                                     [](const Pending& p, std::uint64_t v) { return p.id < v; });
    if (it != pending_.end() && it->id == id) it->at = std::max(it->at, at);
}

void EdgeSpeeds::forget(std::uint64_t id) {
    const auto it = std::lower_bound(pending_.begin(), pending_.end(), id,
                                     [](const Pending& p, std::uint64_t v) { return p.id < v; });
    if (it == pending_.end() || it->id != id) return;
    edge(it->to).bytes += it->bytes;
    pending_.erase(it);
}

void EdgeSpeeds::completed(std::uint64_t id, double at, bool ok) {
    const auto it = std::lower_bound(pending_.begin(), pending_.end(), id,
                                     [](const Pending& p, std::uint64_t v) { return p.id < v; });
    if (it == pending_.end() || it->id != id) return;
    const Pending p = *it;
    pending_.erase(it);
    EdgeSpeed& e = edge(p.to);
    double start = p.at;
    if (options_.one_queue) {
        // One queue: every send posted before this one (a smaller id) was ahead of it, so its
        // turn came no earlier than their completions.
        if (queue_done_id_ < p.id) start = std::max(start, queue_done_at_);
        queue_done_id_ = std::max(queue_done_id_, p.id);
        queue_done_at_ = std::max(queue_done_at_, at);
    }
    if (!ok) {
        ++e.failed;
        return;
    }
    sample(e, p.bytes, start, at, options_.one_queue);
}

void EdgeSpeeds::observe(int to, std::uint64_t bytes, double posted_at, double done_at) {
    if (!options_.measure) return;
    sample(edge(to), bytes, posted_at, done_at, false);
}

void EdgeSpeeds::sample(EdgeSpeed& e, std::uint64_t bytes, double start, double done, bool queued) {
    e.bytes += bytes;
    const double a = options_.alpha;
    if (bytes >= options_.large_bytes) {
        // Queued behind the previous large message: timed from when the edge turned to it.
        // Small messages are left out of this chain: an eager one can complete before a large
        // one posted earlier, which would make the large one look fast.
        const double from = queued ? start : std::max(start, e.last_large_done);
        e.last_large_done = std::max(e.last_large_done, done);
        const double took = done - from;
        if (!(took > 0)) return;  // same instant: nothing to learn
        const double v = static_cast<double>(bytes) / took;
        e.last_throughput = v;
        // Ratio of means: back-to-back messages whose completions come early and late by
        // turns (socket buffers) average to the time they took together.
        const auto b = static_cast<double>(bytes);
        e.mean_bytes = e.large_samples == 0 ? b : (1 - a) * e.mean_bytes + a * b;
        e.mean_seconds = e.large_samples == 0 ? took : (1 - a) * e.mean_seconds + a * took;
        e.throughput = e.mean_bytes / e.mean_seconds;
        ++e.large_samples;
    } else if (bytes <= options_.small_bytes) {
        const double took = std::max(0.0, done - start);
        e.latency = e.small_samples == 0 ? took : (1 - a) * e.latency + a * took;
        ++e.small_samples;
    }
}

const EdgeSpeed* EdgeSpeeds::find(int to) const {
    auto it = edges_.find(to);
    return it == edges_.end() ? nullptr : &it->second;
}

double EdgeSpeeds::throughput(int to) const {
    const EdgeSpeed* e = find(to);
    return e ? e->throughput : 0.0;
}

double EdgeSpeeds::latency(int to) const {
    const EdgeSpeed* e = find(to);
    return e ? e->latency : 0.0;
}

std::optional<double> EdgeSpeeds::seconds_for(int to, std::uint64_t bytes) const {
    const EdgeSpeed* e = find(to);
    if (!e || !e->measured()) return std::nullopt;
    return std::max(e->latency, static_cast<double>(bytes) / e->throughput);
}

json::Json EdgeSpeeds::to_json() const {
    json::Json out = json::Json::array();
    for (const auto& [peer, e] : edges_)
        out.push_back({{"peer", peer},
                       {"throughput", e.throughput},
                       {"latency", e.latency},
                       {"large_samples", e.large_samples},
                       {"small_samples", e.small_samples},
                       {"bytes", e.bytes},
                       {"failed", e.failed}});
    return out;
}

json::Json merge_edge_speeds(json::Json edges, const EdgeSpeeds& speeds) {
    if (speeds.edges().size() == 0) return edges;
    if (!edges.is_array()) edges = json::Json::array();
    const auto fill = [](json::Json& o, const EdgeSpeed& e) {
        o["throughput"] = e.throughput;
        o["latency"] = e.latency;
        o["link_samples"] = e.large_samples + e.small_samples;
        o["link_bytes"] = e.bytes;
    };
    for (const auto& [rank, e] : speeds.edges()) {
        const int peer = rank;  // clang does not capture a structured binding (C++20 allows it)
        auto it = std::find_if(edges.begin(), edges.end(), [&](const json::Json& o) {
            return o.is_object() && o.contains("peer") && o["peer"] == peer;
        });
        if (it != edges.end()) {
            fill(*it, e);
            continue;
        }
        json::Json o = {{"peer", peer}, {"out", true}};
        fill(o, e);
        edges.push_back(std::move(o));
    }
    return edges;
}

}  // namespace gossamer::proto
