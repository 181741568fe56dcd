#include "gossamer/topology/schedule.hpp"

#include <fmt/format.h>

#include <array>

#include "gossamer/core/error.hpp"
#include "gossamer/topology/generators.hpp"

namespace gossamer::topology {
namespace {

class PeriodicSchedule final : public Schedule {
  public:
    PeriodicSchedule(std::vector<std::shared_ptr<const Round>> rounds, WeightKind kind,
                     std::string description)
        : rounds_(std::move(rounds)), kind_(kind), description_(std::move(description)) {}

    int n() const override { return rounds_.front()->graph.n(); }
    std::optional<std::int64_t> period() const override {
        return static_cast<std::int64_t>(rounds_.size());
    }
    std::shared_ptr<const Round> at(std::int64_t t) const override {
        const auto p = static_cast<std::int64_t>(rounds_.size());
        return rounds_[static_cast<std::size_t>(((t % p) + p) % p)];
    }
    WeightKind kind() const override { return kind_; }
    std::string describe() const override { return description_; }

  private:
    std::vector<std::shared_ptr<const Round>> rounds_;
    WeightKind kind_;
    std::string description_;
};

class RandomMatchingSchedule final : public Schedule {
  public:
    RandomMatchingSchedule(int n, std::uint64_t seed, WeightRule rule)
        : n_(n), seed_(seed), rule_(rule) {}

    int n() const override { return n_; }
    std::optional<std::int64_t> period() const override { return std::nullopt; }
    std::shared_ptr<const Round> at(std::int64_t t) const override {
        Digraph g = random_matching(n_, seed_, t);
        MixingMatrix w = make_weights(g, rule_);
        return std::make_shared<const Round>(Round{std::move(g), std::move(w)});
    }
    WeightKind kind() const override { return kind_of(rule_); }
    std::string describe() const override {
        return fmt::format("random_matching (n = {}, seed = {})", n_, seed_);
    }

  private:
    int n_;
    std::uint64_t seed_;
    WeightRule rule_;
};

constexpr std::array<std::string_view, 10> kFamilies = {"ring",
                                                        "torus",
                                                        "hypercube",
                                                        "complete",
                                                        "star",
                                                        "exponential",
                                                        "symmetric_exponential",
                                                        "one_peer_exponential",
                                                        "random_matching",
                                                        "erdos_renyi"};

Round make_round(Digraph g, WeightRule rule) {
    MixingMatrix w = make_weights(g, rule);
    return Round{std::move(g), std::move(w)};
}

}  // namespace

const Digraph& Schedule::base_graph() const {
    std::call_once(base_once_, [this] {
        const std::int64_t rounds = std::min(period().value_or(kBaseRounds), kMaxBaseRounds);
        std::vector<std::shared_ptr<const Round>> keep;
        std::vector<const Digraph*> graphs;
        for (std::int64_t r = 0; r < rounds; ++r) {
            keep.push_back(at(r));
            graphs.push_back(&keep.back()->graph);
        }
        base_ = graph_union(graphs);
    });
    return base_;
}

std::string Schedule::check_once(std::string_view key,
                                 const std::function<std::string()>& check) const {
    std::lock_guard lock(checks_mutex_);
    for (const auto& [k, wrong] : checks_)
        if (k == key) return wrong;
    // Held while the check runs: another thread asking for the same key waits for its answer.
    std::string wrong = check();
    checks_.emplace_back(std::string(key), wrong);
    return wrong;
}

std::shared_ptr<const Schedule> make_periodic(std::vector<Round> rounds, WeightKind kind,
                                              std::string description) {
    if (rounds.empty()) throw TopologyError("a schedule needs at least one round");
    const int n = rounds.front().graph.n();
    std::vector<std::shared_ptr<const Round>> shared;
    for (std::size_t t = 0; t < rounds.size(); ++t) {
        if (rounds[t].graph.n() != n || rounds[t].weights.n() != n)
            throw TopologyError(fmt::format("round {} has a different number of peers", t));
        try {
            check_weights(rounds[t].weights, kind);
        } catch (const TopologyError& e) {
            throw TopologyError(fmt::format("round {}: {}", t, e.what()));
        }
        shared.push_back(std::make_shared<const Round>(std::move(rounds[t])));
    }
    return std::make_shared<PeriodicSchedule>(std::move(shared), kind, std::move(description));
}

std::span<const std::string_view> family_names() noexcept {
    return kFamilies;
}

bool is_family(std::string_view name) noexcept {
    for (auto f : kFamilies)
        if (f == name) return true;
    return false;
}

std::shared_ptr<const Schedule> generate(const FamilySpec& s) {
    const std::string& f = s.family;
    if (!is_family(f)) throw TopologyError(fmt::format("unknown family \"{}\"", f));
    if (s.weights == WeightRule::explicit_weights)
        throw TopologyError("a generated family cannot have explicit weights");
    const std::string desc = fmt::format("{} (n = {})", f, s.n);
    const WeightKind kind = kind_of(s.weights);
    auto single = [&](Digraph g) {
        std::vector<Round> rounds;
        rounds.push_back(make_round(std::move(g), s.weights));
        return make_periodic(std::move(rounds), kind, desc);
    };
    if (f == "ring") return single(ring(s.n));
    if (f == "torus") {
        auto [r, c] = square_factors(s.n);
        if (s.rows || s.cols) {
            r = s.rows ? s.rows : s.n / s.cols;
            c = s.cols ? s.cols : s.n / s.rows;
        }
        if (r < 1 || c < 1 || r * c != s.n)
            throw TopologyError(fmt::format(
                "torus rows x cols must equal n = {}, got {} x {}; give rows and cols whose "
                "product is n",
                s.n, r, c));
        return single(torus(r, c));
    }
    if (f == "hypercube") return single(hypercube(s.n));
    if (f == "complete") return single(complete(s.n));
    if (f == "star") return single(star(s.n));
    if (f == "exponential") return single(exponential(s.n));
    if (f == "symmetric_exponential") return single(symmetric_exponential(s.n));
    if (f == "erdos_renyi") return single(erdos_renyi(s.n, s.p, s.seed));
    if (f == "one_peer_exponential") {
        (void)one_peer_exponential(s.n, 0);  // validates n
        const int period = s.n > 1 ? floor_log2(s.n) : 1;
        std::vector<Round> rounds;
        for (int t = 0; t < period; ++t)
            rounds.push_back(make_round(one_peer_exponential(s.n, t), s.weights));
        return make_periodic(std::move(rounds), kind, desc);
    }
    // random_matching
    (void)random_matching(s.n, s.seed, 0);
    return std::make_shared<RandomMatchingSchedule>(s.n, s.seed, s.weights);
}

}  // namespace gossamer::topology
