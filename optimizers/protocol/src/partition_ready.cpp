// The partition-ready event of the protocol interface (docs/algorithms/protocol-contract.md,
// "Partition-ready"): which partitions of the running step the compute side has declared final, the
// ranges that makes the protocol's, and the ownership check of their gradients.
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/protocol.hpp"

namespace gossamer::proto {
namespace {

// A cheap hash of a gradient range (one multiply per value): detects any change of its bits.
std::uint64_t hash_of(std::span<const float> v) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
    for (float f : v) {
        std::uint32_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        h = (h ^ bits) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

}  // namespace

void Protocol::partition_ready(Time now, std::uint32_t id, Actions& out) {
    const PartitionLayout* parts = ctx_.worker->partitions();
    const std::size_t count = parts ? parts->count() : 0;
    if (id >= count)
        throw Error(
            fmt::format("{}: partition_ready for partition {}, but the model has {} "
                        "partition(s)",
                        name(), id, count));
    if (!stepping_)
        throw Error(
            fmt::format("{}: partition_ready for partition {} ('{}') while no step runs; "
                        "declare a partition ready between the start of a step and its "
                        "end",
                        name(), id, (*parts)[id].name));
    if (ready_.size() != count) {
        ready_.assign(count, 0);
        ready_hash_.assign(count, 0);
    }
    if (ready_[id]) return;  // declared twice: counts once
    ready_[id] = 1;
    const auto g = ctx_.worker->gradient();
    if (!g.empty()) ready_hash_[id] = hash_of(g.subspan((*parts)[id].offset, (*parts)[id].size));
    on_partition_ready(now, id, out);
    after(out);
}

void Protocol::check_ready_unchanged() const {
    if (ready_.empty()) return;
    const PartitionLayout& parts = *ctx_.worker->partitions();
    const auto g = ctx_.worker->gradient();
    if (g.empty()) return;
    for (std::size_t id = 0; id < ready_.size(); ++id)
        if (ready_[id] && hash_of(g.subspan(parts[id].offset, parts[id].size)) != ready_hash_[id])
            throw Error(fmt::format(
                "{}: rank {}: the gradient of partition {} ('{}') changed after it was declared "
                "ready; from partition_ready until the step ends the partition belongs to the "
                "protocol (docs/algorithms/protocol-contract.md, \"Partition-ready\")",
                name(), ctx_.rank, id, parts[id].name));
}

std::vector<double> backward_ready_fractions(const PartitionLayout& parts, std::size_t size) {
    std::vector<double> f(parts.count(), 1.0);
    const double all = static_cast<double>(std::max<std::size_t>(size, 1));
    double later = 0;
    for (std::size_t id = parts.count(); id-- > 1;) {
        later += static_cast<double>(parts[id].size);
        f[id] = std::min(1.0, 1.0 / 3.0 + 2.0 / 3.0 * later / all);
    }
    return f;
}

bool Protocol::range_ready(std::size_t offset, std::size_t size) const {
    if (!stepping_) return true;
    const PartitionLayout* parts = ctx_.worker->partitions();
    if (!parts || ready_.empty()) return false;
    for (std::size_t id = 0; id < parts->count(); ++id) {
        const Partition& p = (*parts)[id];
        if (p.offset < offset + size && offset < p.end() && !ready_[id]) return false;
    }
    return true;
}

std::span<float> Protocol::ready_params(std::size_t offset, std::size_t size) {
    assert(range_ready(offset, size) && "a protocol touched a partition that is not ready");
    return ctx_.worker->params().subspan(offset, size);
}

bool takes_partition_ready(const LocalWorker& w) {
    return w.math() && w.partitions() && !w.device() && !w.multirate();
}

void check_partition_ready_option(bool wanted, const LocalWorker& w) {
    if (!wanted) return;
    if (w.multirate())
        throw ConfigError("", "partition_ready",
                          "multirate partitions gossip on their own round counters, which "
                          "partition_ready does not follow",
                          "drop partition_ready or the multirate section");
    if (w.device())
        throw ConfigError("", "partition_ready",
                          "a worker on a device steps the whole model at once",
                          "drop partition_ready, or train on the host");
}

}  // namespace gossamer::proto
