// The live part of a topology (docs/algorithms/dpsgd.md, "Weights over the live graph").
#include "gossamer/topology/live.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"

namespace gossamer::topology {

std::shared_ptr<const Schedule> live_schedule(const Schedule& s, const std::vector<int>& live) {
    const int n = s.n();
    if (live.empty()) throw TopologyError("live_schedule: no live peer");
    std::vector<int> index(static_cast<std::size_t>(n), -1);
    for (std::size_t k = 0; k < live.size(); ++k) {
        const int r = live[k];
        if (r < 0 || r >= n || (k > 0 && r <= live[k - 1]))
            throw TopologyError(fmt::format(
                "live_schedule: the live ranks must be ascending and in [0, {}); found {}", n, r));
        index[static_cast<std::size_t>(r)] = static_cast<int>(k);
    }
    const int m = static_cast<int>(live.size());
    const std::int64_t rounds =
        std::min(s.period().value_or(Schedule::kBaseRounds), Schedule::kMaxBaseRounds);
    const bool push_sum = s.kind() == WeightKind::push_sum;
    std::vector<Round> out;
    out.reserve(static_cast<std::size_t>(rounds));
    for (std::int64_t t = 0; t < rounds; ++t) {
        const auto round = s.at(t);
        std::vector<Edge> edges;
        for (const Edge& e : round->graph.edges()) {
            const int a = index[static_cast<std::size_t>(e.from)];
            const int b = index[static_cast<std::size_t>(e.to)];
            if (a >= 0 && b >= 0) edges.push_back({a, b});
        }
        std::vector<Triplet> w;
        for (int i = 0; i < n; ++i)
            for (const auto& [j, x] : round->weights.row(i)) {
                const int a = index[static_cast<std::size_t>(i)];
                const int b = index[static_cast<std::size_t>(j)];
                if (a >= 0 && b >= 0)
                    w.push_back({a, b, x});
                else if (!push_sum && a >= 0)  // an absent sender: the receiver keeps it
                    w.push_back({a, a, x});
                else if (push_sum && b >= 0)  // an absent receiver: the sender keeps it
                    w.push_back({b, b, x});
            }
        out.push_back(Round{Digraph(m, std::move(edges)), MixingMatrix(m, std::move(w))});
    }
    return make_periodic(std::move(out), s.kind(),
                         fmt::format("{}, live part ({} of {} peers)", s.describe(), m, n));
}

Report analyse_live(const Schedule& s, const std::vector<int>& live) {
    AnalysisOptions o;
    o.max_rounds = 10'000;
    o.max_work = 20'000'000;
    return analyse(*live_schedule(s, live), o);
}

std::string describe_live(const Report& r, const std::vector<int>& live, int n, int version) {
    std::string ranks;
    for (int x : live) ranks += (ranks.empty() ? "" : ", ") + std::to_string(x);
    const std::string spectral = r.spectral_gap
                                     ? fmt::format("spectral gap {:.4g}", *r.spectral_gap)
                                     : std::string("no spectral gap computed");
    const std::string rounds =
        r.rounds_to_target
            ? fmt::format("{} rounds to {:g}", *r.rounds_to_target, r.target)
            : fmt::format("not averaged to {:g} within {} rounds", r.target, r.max_rounds);
    return fmt::format("topology version {}: {} of {} peers live (ranks {}): {}, {}, {}", version,
                       live.size(), n, ranks,
                       r.strongly_connected ? "strongly connected" : "NOT strongly connected",
                       spectral, rounds);
}

}  // namespace gossamer::topology
