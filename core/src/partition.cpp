#include "gossamer/core/partition.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <set>

#include "gossamer/core/digest.hpp"
#include "gossamer/core/json.hpp"

namespace gossamer {
namespace {

constexpr const char* kOnce = "give each parameter to exactly one partition";

struct Problem {
    std::string what;
    std::size_t index;  // the offending partition, in the caller's order
};

std::string range(const Partition& p) {
    return fmt::format("'{}' [{}, {})", p.name, p.offset, p.offset + p.size);
}

std::optional<Problem> find_problem(std::span<const Partition> parts, std::size_t total) {
    // Names seen so far: a set, so that a model file of many partitions is checked in
    // n log n, not n^2 comparisons (a 1 MB file holds 50,000 partitions).
    std::set<std::string_view> names;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const Partition& p = parts[i];
        if (p.name.empty())
            return Problem{fmt::format("partition {} [{}, {}) has no name; name every partition", i,
                                       p.offset, p.offset + p.size),
                           i};
        if (p.size == 0)
            return Problem{fmt::format("partition '{}' is empty; give it at least one parameter "
                                       "or remove it",
                                       p.name),
                           i};
        if (p.offset > total || p.size > total - p.offset)
            return Problem{fmt::format("partition {} ends past the {} parameters of the model; "
                                       "keep every range inside [0, {})",
                                       range(p), total, total),
                           i};
        if (!names.insert(p.name).second)
            return Problem{fmt::format("two partitions are named '{}'; give each partition its "
                                       "own name",
                                       p.name),
                           i};
    }
    std::vector<std::size_t> order(parts.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return parts[a].offset < parts[b].offset;
    });
    std::size_t covered = 0;          // [0, covered) has an owner
    std::optional<std::size_t> last;  // the partition that reaches `covered`
    for (std::size_t i : order) {
        const Partition& p = parts[i];
        if (p.offset < covered)
            return Problem{fmt::format("partitions {} and {} overlap; {}", range(parts[*last]),
                                       range(p), kOnce),
                           i};
        if (p.offset > covered)
            return Problem{
                fmt::format(
                    "parameters [{}, {}) belong to no partition ({} {}); {}", covered, p.offset,
                    last ? "between '" + parts[*last].name + "' and" : std::string("before"),
                    "'" + p.name + "'", kOnce),
                i};
        covered = p.end();
        last = i;
    }
    if (covered < total)
        return Problem{
            fmt::format("parameters [{}, {}) belong to no partition{}; {}", covered, total,
                        last ? " (after '" + parts[*last].name + "')" : std::string(), kOnce),
            last.value_or(0)};
    return std::nullopt;
}

std::string join_names(std::span<const Partition> layers) {
    std::vector<std::string> names;
    for (const auto& l : layers) names.push_back(l.name);
    return fmt::format("{}", fmt::join(names, ", "));
}

// Shared by group_layers and partitions_from_config: `fail(group, entry, what, fix)` reports a
// problem with groups[group].layers[entry] (entry == npos: the whole group; group == npos: the
// grouping as a whole) and must not return.
using Fail = std::function<void(std::size_t, std::size_t, const std::string&, const std::string&)>;
constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

std::vector<Partition> resolve_groups(std::span<const Partition> layers,
                                      std::span<const LayerGroup> groups, const Fail& fail) {
    std::vector<std::size_t> owner(layers.size(), npos);
    std::optional<std::size_t> star;
    std::vector<std::string> names;
    for (const auto& l : layers) names.push_back(l.name);
    for (std::size_t g = 0; g < groups.size(); ++g) {
        if (groups[g].layers.empty())
            fail(g, npos, fmt::format("partition '{}' names no layers", groups[g].name),
                 fmt::format("list some of the layers {} or \"*\"", join_names(layers)));
        for (std::size_t e = 0; e < groups[g].layers.size(); ++e) {
            const std::string& want = groups[g].layers[e];
            if (want == "*") {
                if (star)
                    fail(g, e,
                         fmt::format("\"*\" already stands for the remaining layers in "
                                     "partition '{}'",
                                     groups[*star].name),
                         "use \"*\" in one partition only");
                star = g;
                continue;
            }
            auto it = std::find(names.begin(), names.end(), want);
            if (it == names.end()) {
                auto near = json::closest(want, names);
                fail(g, e, fmt::format("unknown layer \"{}\"", want),
                     (near ? fmt::format("did you mean \"{}\"? ", *near) : std::string()) +
                         "the model's layers are " + join_names(layers));
            }
            const auto l = static_cast<std::size_t>(it - names.begin());
            if (owner[l] != npos)
                fail(g, e,
                     fmt::format("layer \"{}\" is already in partition '{}'", want,
                                 groups[owner[l]].name),
                     "give each layer to exactly one partition");
            owner[l] = g;
        }
    }
    std::vector<std::string> orphans;
    for (std::size_t l = 0; l < layers.size(); ++l) {
        if (owner[l] != npos) continue;
        if (star)
            owner[l] = *star;
        else
            orphans.push_back(layers[l].name);
    }
    if (!orphans.empty()) {
        fail(npos, npos, fmt::format("layers {} belong to no partition", fmt::join(orphans, ", ")),
             "name them in a partition, or add \"*\" (the remaining layers) to one");
    }
    std::vector<Partition> parts;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        std::size_t first = npos, last = npos;
        for (std::size_t l = 0; l < layers.size(); ++l) {
            if (owner[l] != g) continue;
            if (first == npos) first = l;
            last = l;
        }
        if (first == npos)
            fail(g, npos,
                 fmt::format("partition '{}' gets no layers: \"*\" matched none", groups[g].name),
                 "remove the partition or give it a layer");
        for (std::size_t l = first; l <= last; ++l)
            if (owner[l] != g)
                fail(g, npos,
                     fmt::format("partition '{}' would hold layers {} and {} but not {} between "
                                 "them, and a partition is one contiguous range",
                                 groups[g].name, layers[first].name, layers[last].name,
                                 layers[l].name),
                     fmt::format("give \"{}\" to '{}' too, or split '{}' in two", layers[l].name,
                                 groups[g].name, groups[g].name));
        parts.push_back({groups[g].name, layers[first].offset,
                         layers[last].offset + layers[last].size - layers[first].offset});
    }
    return parts;
}

std::size_t total_of(std::span<const Partition> layers) {
    std::size_t total = 0;
    for (const auto& l : layers) total = std::max(total, l.end());
    return total;
}

}  // namespace

std::optional<std::string> partition_problem(std::span<const Partition> parts, std::size_t total) {
    if (auto p = find_problem(parts, total)) return p->what;
    return std::nullopt;
}

PartitionLayout::PartitionLayout(std::vector<Partition> parts, std::size_t total)
    : parts_(std::move(parts)), total_(total) {
    if (auto p = find_problem(parts_, total_)) throw PartitionError(p->what);
    std::sort(parts_.begin(), parts_.end(),
              [](const Partition& a, const Partition& b) { return a.offset < b.offset; });
}

PartitionLayout PartitionLayout::per_layer(std::span<const Partition> layers) {
    return PartitionLayout(std::vector<Partition>(layers.begin(), layers.end()), total_of(layers));
}

PartitionLayout PartitionLayout::whole(std::size_t total, std::string name) {
    if (total == 0) return PartitionLayout();
    return PartitionLayout({Partition{std::move(name), 0, total}}, total);
}

std::optional<std::size_t> PartitionLayout::find(std::string_view name) const {
    for (std::size_t i = 0; i < parts_.size(); ++i)
        if (parts_[i].name == name) return i;
    return std::nullopt;
}

std::size_t PartitionLayout::owner(std::size_t index) const {
    if (index >= total_)
        throw std::out_of_range(
            fmt::format("parameter {} is outside a layout of {} parameters", index, total_));
    auto it = std::upper_bound(parts_.begin(), parts_.end(), index,
                               [](std::size_t i, const Partition& p) { return i < p.offset; });
    return static_cast<std::size_t>(it - parts_.begin()) - 1;
}

std::uint64_t PartitionLayout::fingerprint() const noexcept {
    Digest d;
    d.u64(total_).u64(parts_.size());
    for (const auto& p : parts_) d.text(p.name).u64(p.offset).u64(p.size);
    return d.value();
}

std::string PartitionLayout::describe() const {
    std::string out;
    for (const auto& p : parts_)
        out += fmt::format("{}{} [{}, {})", out.empty() ? "" : ", ", p.name, p.offset, p.end());
    return out.empty() ? "(no partitions)" : out;
}

PartitionLayout group_layers(std::span<const Partition> layers,
                             std::span<const LayerGroup> groups) {
    Fail fail = [&](std::size_t g, std::size_t e, const std::string& what, const std::string& fix) {
        std::string where = g == npos ? std::string()
                            : e == npos
                                ? fmt::format("partition '{}': ", groups[g].name)
                                : fmt::format("partition '{}', entry {}: ", groups[g].name, e);
        throw PartitionError(where + what + "; " + fix);
    };
    return PartitionLayout(resolve_groups(layers, groups, fail), total_of(layers));
}

PartitionLayout partitions_from_config(const json::Node& node, std::span<const Partition> layers) {
    if (!node.is_object())
        node.fail("expected an object of partitions",
                  R"(write e.g. {"fast": ["fc3"], "slow": ["*"]})");
    std::vector<LayerGroup> groups;
    std::vector<json::Node> group_nodes;
    std::vector<Partition> ranges;
    std::vector<json::Node> range_nodes;
    for (const auto& item : node.value().items()) {
        json::Node sub = node.at(item.key());
        if (sub.is_object()) {
            sub.expect_object({"offset", "size"});
            ranges.push_back({item.key(), static_cast<std::size_t>(sub.at("offset").as_int(0)),
                              static_cast<std::size_t>(sub.at("size").as_int(1))});
            range_nodes.push_back(sub);
            continue;
        }
        if (!sub.is_array())
            sub.fail("expected an array of layer names or {\"offset\": o, \"size\": n}",
                     "the model's layers are " + join_names(layers));
        LayerGroup group{item.key(), {}};
        for (const auto& e : sub.elements()) group.layers.push_back(e.as_string());
        groups.push_back(std::move(group));
        group_nodes.push_back(sub);
    }
    if (groups.empty() && ranges.empty())
        node.fail("no partitions", R"(write e.g. {"fast": ["fc3"], "slow": ["*"]})");
    std::vector<Partition> parts;
    if (!groups.empty()) {
        // Layers wholly inside an explicit range are taken; "*" then means the rest.
        std::vector<Partition> free_layers;
        for (const auto& l : layers) {
            bool taken = false;
            for (const auto& r : ranges)
                taken = taken || (l.offset >= r.offset && l.end() <= r.end());
            if (!taken) free_layers.push_back(l);
        }
        Fail fail = [&](std::size_t g, std::size_t e, const std::string& what,
                        const std::string& fix) {
            if (g == npos) node.fail(what, fix);
            if (e == npos) group_nodes[g].fail(what, fix);
            group_nodes[g][e].fail(what, fix);
        };
        parts = resolve_groups(free_layers, groups, fail);
    }
    parts.insert(parts.end(), ranges.begin(), ranges.end());
    if (auto p = find_problem(parts, total_of(layers))) {
        const std::string& name = parts[p->index].name;
        for (std::size_t i = 0; i < groups.size(); ++i)
            if (groups[i].name == name) group_nodes[i].fail(p->what);
        for (std::size_t i = 0; i < ranges.size(); ++i)
            if (ranges[i].name == name) range_nodes[i].fail(p->what);
        node.fail(p->what);
    }
    return PartitionLayout(std::move(parts), total_of(layers));
}

}  // namespace gossamer
