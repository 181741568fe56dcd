#include "gossamer/core/sharding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gossamer/core/error.hpp"

namespace gossamer {
namespace {

// Stream tags, so that the split, the Dirichlet draws and the epoch orders of one seed are
// independent of each other.
constexpr std::uint64_t kIidStream = 0x11D;
constexpr std::uint64_t kDirichletStream = 0xD1C7;
constexpr std::uint64_t kEpochStream = 0xE90C;

void shuffle(std::vector<std::int64_t>& v, Rng& rng) {
    for (std::size_t i = v.size(); i > 1; --i) {
        const auto j = static_cast<std::size_t>(rng.below(i));
        std::swap(v[i - 1], v[j]);
    }
}

// Splits `total` into integer parts proportional to `weights` (which sum to > 0): part r ends
// at round(total * (w_0 + ... + w_r) / sum). The parts sum to `total` exactly, a zero weight
// gets nothing, and no part is off by more than one from its ideal share.
std::vector<std::int64_t> apportion(std::int64_t total, std::span<const double> weights) {
    const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
    std::vector<std::int64_t> parts(weights.size());
    double cumulative = 0;
    std::int64_t previous = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
        cumulative += weights[i];
        std::int64_t end = i + 1 == weights.size()
                               ? total
                               : std::llround(static_cast<double>(total) * (cumulative / sum));
        end = std::clamp(end, previous, total);
        parts[i] = weights[i] > 0 ? end - previous : 0;
        previous += parts[i];
    }
    return parts;
}

void check_spec(const Dataset& data, const ShardSpec& spec) {
    if (spec.peers < 1)
        throw ConfigError("", "sharding.peers", fmt::format("{} peers requested", spec.peers),
                          "use at least 1 peer");
    if (spec.peers > data.size())
        throw ConfigError(
            "", "sharding.peers",
            fmt::format("{} peers for a data set of {} samples", spec.peers, data.size()),
            fmt::format("use at most {} peers", data.size()));
    if (spec.mode == ShardMode::dirichlet) {
        if (!(spec.alpha > 0) || !std::isfinite(spec.alpha))
            throw ConfigError("", "sharding.alpha",
                              fmt::format("Dirichlet alpha {} must be finite and > 0", spec.alpha),
                              "use e.g. 0.1 for strong label skew, 100 for near-iid");
        if (!spec.sizes.empty())
            throw ConfigError("", "sharding.sizes",
                              "relative sizes apply to iid sharding only; Dirichlet sharding "
                              "sets the sizes itself",
                              "remove sizes or use iid sharding");
        if (data.classes < 1 || data.labels.size() != static_cast<std::size_t>(data.size()))
            throw ConfigError("", "sharding.mode",
                              fmt::format("Dirichlet label skew needs a labelled data set; {} "
                                          "has no labels",
                                          data.name),
                              "use iid sharding");
        return;
    }
    if (spec.sizes.empty()) return;
    if (spec.sizes.size() != static_cast<std::size_t>(spec.peers))
        throw ConfigError(
            "", "sharding.sizes",
            fmt::format("{} relative sizes for {} peers", spec.sizes.size(), spec.peers),
            "give one size per peer");
    for (std::size_t r = 0; r < spec.sizes.size(); ++r)
        if (!(spec.sizes[r] > 0) || !std::isfinite(spec.sizes[r]))
            throw ConfigError("", fmt::format("sharding.sizes[{}]", r),
                              fmt::format("relative size {} must be finite and > 0", spec.sizes[r]),
                              "use a positive number");
}

// iid: shuffled, then cut; contiguous: cut in the data's own order.
std::vector<std::vector<std::int64_t>> iid_shards(const Dataset& data, const ShardSpec& spec) {
    const std::int64_t n = data.size();
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    Rng rng(derive_seed(spec.seed, kIidStream));
    if (spec.mode == ShardMode::iid) shuffle(order, rng);
    std::vector<double> weights =
        spec.sizes.empty() ? std::vector<double>(static_cast<std::size_t>(spec.peers), 1.0)
                           : spec.sizes;
    const auto counts = apportion(n, weights);
    std::vector<std::vector<std::int64_t>> shards(counts.size());
    auto it = order.begin();
    for (std::size_t r = 0; r < counts.size(); ++r) {
        if (counts[r] == 0)
            throw ConfigError("", fmt::format("sharding.sizes[{}]", r),
                              fmt::format("relative size {} leaves peer {} no samples out of {}",
                                          weights[r], r, n),
                              "raise that size or use fewer peers");
        shards[r].assign(it, it + counts[r]);
        it += counts[r];
    }
    return shards;
}

// The Dirichlet assignment: for each class in turn, proportions over the peers are drawn from
// Dirichlet(alpha) and the class's shuffled samples cut by them, but no peer takes more than its
// equal share of the whole set (apportion(n, 1, ..., 1): n / peers, within one). What a class's
// cut would give a peer beyond its room is cut again over the peers with room, by their drawn
// proportions; when none of those drew anything, one of them, chosen uniformly, takes the rest
// (as far as its room goes). The rooms add up to n, so every sample finds a peer and every shard
// ends at its equal share exactly: a peer's epoch is as many steps as any other's.
std::vector<std::vector<std::int64_t>> dirichlet_shards(const Dataset& data,
                                                        const ShardSpec& spec) {
    const auto peers = static_cast<std::size_t>(spec.peers);
    std::vector<std::vector<std::int64_t>> by_class(static_cast<std::size_t>(data.classes));
    for (std::size_t i = 0; i < data.labels.size(); ++i) {
        const auto y = data.labels[i];
        if (y < 0 || y >= data.classes)
            throw ConfigError(
                data.name, "",
                fmt::format("label {} of sample {} is outside [0, {})", y, i, data.classes),
                "fix the data set's labels");
        by_class[static_cast<std::size_t>(y)].push_back(static_cast<std::int64_t>(i));
    }
    Rng rng(derive_seed(derive_seed(spec.seed, kDirichletStream), 0));
    std::vector<std::vector<std::int64_t>> shards(peers);
    auto room = apportion(data.size(), std::vector<double>(peers, 1.0));
    std::vector<double> p(peers);
    for (auto& members : by_class) {
        shuffle(members, rng);
        dirichlet(rng, spec.alpha, p);
        auto it = members.begin();
        while (it != members.end()) {
            std::vector<std::size_t> open;
            for (std::size_t r = 0; r < peers; ++r) {
                if (room[r] <= 0) p[r] = 0;
                if (room[r] > 0) open.push_back(r);
            }
            if (std::accumulate(p.begin(), p.end(), 0.0) <= 0) {
                std::fill(p.begin(), p.end(), 0.0);
                p[open[static_cast<std::size_t>(rng.below(open.size()))]] = 1.0;
            }
            const auto counts = apportion(static_cast<std::int64_t>(members.end() - it), p);
            for (std::size_t r = 0; r < peers; ++r) {
                const std::int64_t c = std::min(counts[r], room[r]);
                shards[r].insert(shards[r].end(), it, it + c);
                it += c;
                room[r] -= c;
            }
        }
    }
    return shards;
}

void check_one_batch(int batch_size, int rank, std::int64_t shard_size) {
    if (batch_size > shard_size)
        throw ConfigError("", "batch_size",
                          fmt::format("batch size {} is larger than peer {}'s shard of {} samples",
                                      batch_size, rank, shard_size),
                          "lower batch_size or use fewer peers");
}

void check_positive_batch(int batch_size) {
    if (batch_size < 1)
        throw ConfigError("", "batch_size",
                          fmt::format("batch size {} is not positive", batch_size),
                          "use batch_size >= 1");
}

}  // namespace

double gamma_variate(Rng& rng, double shape) {
    if (shape < 1.0) {
        // Gamma(a) = Gamma(a + 1) * U^(1/a) (Marsaglia & Tsang, section 6).
        const double g = gamma_variate(rng, shape + 1.0);
        return g * std::pow(rng.uniform(), 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
        double x = 0, v = 0;
        do {
            x = rng.normal();
            v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        const double u = rng.uniform();
        if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return d * v;
        if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
    }
}

void dirichlet(Rng& rng, double alpha, std::span<double> out) {
    double sum = 0;
    for (auto& g : out) sum += (g = gamma_variate(rng, alpha));
    if (sum > 0) {
        for (auto& g : out) g /= sum;
        return;
    }
    std::fill(out.begin(), out.end(), 0.0);
    if (!out.empty()) out[static_cast<std::size_t>(rng.below(out.size()))] = 1.0;
}

std::vector<std::vector<std::int64_t>> shard_indices(const Dataset& data, const ShardSpec& spec) {
    check_spec(data, spec);
    auto shards =
        spec.mode == ShardMode::dirichlet ? dirichlet_shards(data, spec) : iid_shards(data, spec);
    for (auto& s : shards) std::sort(s.begin(), s.end());
    return shards;
}

Dataset subset(const Dataset& data, std::span<const std::int64_t> rows, std::string name) {
    Dataset out;
    out.name = std::move(name);
    out.features = data.features;
    out.classes = data.classes;
    out.channels = data.channels;
    out.height = data.height;
    out.width = data.width;
    out.vocabulary = data.vocabulary;
    const auto f = static_cast<std::size_t>(data.features);
    const bool has_labels = data.labels.size() == static_cast<std::size_t>(data.size());
    const bool has_targets = data.targets.size() == static_cast<std::size_t>(data.size());
    out.x.reserve(rows.size() * f);
    for (auto r : rows) {
        const auto begin =
            data.x.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * f);
        out.x.insert(out.x.end(), begin, begin + static_cast<std::ptrdiff_t>(f));
        if (has_labels) out.labels.push_back(data.labels[static_cast<std::size_t>(r)]);
        if (has_targets) out.targets.push_back(data.targets[static_cast<std::size_t>(r)]);
    }
    return out;
}

namespace {
void check_rank(int rank, int peers) {
    if (rank < 0 || rank >= peers)
        throw ConfigError("", "rank", fmt::format("rank {} is outside [0, {})", rank, peers),
                          fmt::format("use a rank from 0 to {}", peers - 1));
}
}  // namespace

Dataset shard_for_peer(const Dataset& data, const ShardSpec& spec, int rank) {
    check_rank(rank, spec.peers);
    return shard_for_peer(data, shard_indices(data, spec), rank);
}

Dataset shard_for_peer(const Dataset& data, std::span<const std::vector<std::int64_t>> shards,
                       int rank) {
    check_rank(rank, static_cast<int>(shards.size()));
    return subset(data, shards[static_cast<std::size_t>(rank)],
                  fmt::format("{}/shard{}", data.name, rank));
}

void check_batch_size(int batch_size, std::span<const std::int64_t> shard_sizes) {
    check_positive_batch(batch_size);
    for (std::size_t r = 0; r < shard_sizes.size(); ++r)
        check_one_batch(batch_size, static_cast<int>(r), shard_sizes[r]);
}

std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed,
                                            std::uint64_t epoch) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
    std::iota(order.begin(), order.end(), 0);
    Rng rng(derive_seed(derive_seed(seed, kEpochStream), epoch));
    shuffle(order, rng);
    return order;
}

Batch gather_batch(const Dataset& data, std::span<const std::int64_t> rows, BatchBuffer& buffer) {
    const auto f = static_cast<std::size_t>(data.features);
    const bool has_labels = data.labels.size() == static_cast<std::size_t>(data.size());
    const bool has_targets = data.targets.size() == static_cast<std::size_t>(data.size());
    buffer.x.resize(rows.size() * f);
    buffer.labels.resize(has_labels ? rows.size() : 0);
    buffer.targets.resize(has_targets ? rows.size() : 0);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto r = static_cast<std::size_t>(rows[i]);
        std::copy_n(data.x.data() + r * f, f, buffer.x.data() + i * f);
        if (has_labels) buffer.labels[i] = data.labels[r];
        if (has_targets) buffer.targets[i] = data.targets[r];
    }
    Batch b;
    b.size = static_cast<int>(rows.size());
    b.features = data.features;
    b.x = buffer.x.data();
    b.labels = has_labels ? buffer.labels.data() : nullptr;
    b.targets = has_targets ? buffer.targets.data() : nullptr;
    return b;
}

BatchLoader::BatchLoader(const Dataset& shard, int batch_size, std::uint64_t seed, int rank,
                         bool drop_last)
    : data_(&shard), batch_size_(batch_size), seed_(seed), drop_last_(drop_last) {
    check_positive_batch(batch_size);
    check_one_batch(batch_size, rank, shard.size());
    const std::int64_t n = shard.size();
    batches_per_epoch_ = drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
    start_epoch(0);
}

void BatchLoader::start_epoch(std::uint64_t epoch) {
    epoch_ = epoch;
    cursor_ = 0;
    order_ = epoch_permutation(data_->size(), seed_, epoch);
}

Batch BatchLoader::batch(std::int64_t index) {
    const std::int64_t begin = index * batch_size_;
    const std::int64_t end = std::min<std::int64_t>(begin + batch_size_, data_->size());
    return gather_batch(*data_,
                        std::span<const std::int64_t>(order_).subspan(
                            static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
                        buffer_);
}

Batch BatchLoader::at_step(std::int64_t step) {
    if (step < 0) throw Error(fmt::format("BatchLoader::at_step: step {} is negative", step));
    const auto epoch = static_cast<std::uint64_t>(step / batches_per_epoch_);
    if (epoch != epoch_) start_epoch(epoch);
    return batch(step % batches_per_epoch_);
}

std::optional<Batch> BatchLoader::next() {
    if (cursor_ >= batches_per_epoch_) return std::nullopt;
    return batch(cursor_++);
}

}  // namespace gossamer
