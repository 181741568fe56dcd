#include "gossamer/optimizers/local/multirate.hpp"

#include <fmt/format.h>

#include <string>

#include "gossamer/core/error.hpp"

namespace gossamer::optim {

Multirate::Multirate(PartitionLayout layout)
    : layout_(std::move(layout)), rates_(layout_.count()) {}

Multirate::Multirate(PartitionLayout layout, std::vector<PartitionRate> rates,
                     BackwardMode backward)
    : layout_(std::move(layout)), rates_(std::move(rates)), backward_(backward) {
    if (rates_.size() != layout_.count())
        throw Error(
            fmt::format("multirate: {} rates for {} partitions", rates_.size(), layout_.count()));
    for (const auto& r : rates_)
        if (r.period < 1 || r.gossip_period < 1) throw Error("multirate: periods must be >= 1");
    for (const auto& r : rates_)
        if (r.gossip_offset < 0 || r.gossip_offset >= r.gossip_period)
            throw Error("multirate: a gossip offset must be in [0, gossip period)");
}

bool Multirate::active() const noexcept {
    for (const auto& r : rates_)
        if (r.period > 1) return true;
    return per_partition_gossip();
}

bool Multirate::per_partition_gossip() const noexcept {
    for (const auto& r : rates_)
        if (r.gossip_period > 1 || r.compressor || r.gossip_offset != 0) return true;
    return false;
}

Multirate parse_multirate(const json::Node& node, const PartitionLayout& layout) {
    node.expect_object({"backward", "partitions"});
    BackwardMode backward = BackwardMode::skip;
    if (auto b = node.find("backward"))
        backward = b->as_enum({"skip", "full"}) == "skip" ? BackwardMode::skip : BackwardMode::full;
    std::vector<PartitionRate> rates(layout.count());
    std::string names;
    for (const auto& p : layout.partitions()) names += (names.empty() ? "" : ", ") + p.name;
    if (auto parts = node.find("partitions")) {
        if (!parts->is_object())
            parts->fail("expected an object keyed by partition name",
                        "e.g. {\"slow\": {\"period\": 4}}");
        for (const auto& item : parts->value().items()) {
            const json::Node entry = parts->at(item.key());
            const auto id = layout.find(item.key());
            if (!id)
                entry.fail(
                    fmt::format("unknown partition \"{}\"; the layout has {}", item.key(), names),
                    "name one of those, or define it in \"partitions\"");
            entry.expect_object({"period", "gossip_period", "compressor"});
            PartitionRate& r = rates[*id];
            if (auto v = entry.find("period")) {
                if (!v->value().is_number_integer() || v->value().get<std::int64_t>() < 1)
                    v->fail(
                        fmt::format("period {} must be an integer >= 1 (steps)", v->value().dump()),
                        "use e.g. 4: the partition updates every 4th step at 4x the rate");
                r.period = static_cast<int>(v->as_int(1, 1'000'000));
            }
            r.gossip_period = r.period;
            if (auto v = entry.find("gossip_period")) {
                if (!v->value().is_number_integer() || v->value().get<std::int64_t>() < 1)
                    v->fail(fmt::format("gossip_period {} must be an integer >= 1 (steps)",
                                        v->value().dump()),
                            "use e.g. 4 (the default is the partition's period)");
                r.gossip_period = static_cast<int>(v->as_int(1, 1'000'000));
            }
            if (auto c = entry.find("compressor")) r.compressor = parse_compressor_config(*c);
        }
        bool fast = false;
        for (const auto& r : rates) fast = fast || r.period == 1;
        if (!fast)
            parts->fail("every partition has a period above 1, so some steps would update nothing",
                        "give the fast partition (e.g. the last layer) period 1");
    }
    Multirate m(layout, std::move(rates), backward);
    m.source = node;
    return m;
}

}  // namespace gossamer::optim
