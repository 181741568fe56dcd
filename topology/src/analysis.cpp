#include "gossamer/topology/analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "gossamer/core/rng.hpp"
#include "gossamer/core/units.hpp"
#include "gossamer/topology/spectral.hpp"

namespace gossamer::topology {
namespace {

void say(const AnalysisOptions& o, std::string_view line) {
    if (o.progress) o.progress(line);
}

// Multiply-adds of one round of the averaging run (W x, the disagreement; twice for push-sum).
std::int64_t work_per_round(const Schedule& s) {
    const auto round = s.at(0);
    const auto per = static_cast<std::int64_t>(round->weights.nonzeros()) + s.n();
    return s.kind() == WeightKind::push_sum ? 2 * per : per;
}

// One averaging run: applies W(0), W(1), ... to a random vector (and to w = 1 for push-sum)
// and calls `step(t, disagreement / initial disagreement)` after every round until it returns
// false or max_rounds pass. `tick`, when set, hears about the run every 2e7 multiply-adds or so.
template <typename Step>
void averaging_run(const Schedule& s, std::int64_t max_rounds, std::uint64_t seed, Step step,
                   const std::function<void(std::int64_t, double)>& tick = {}) {
    const std::int64_t tick_every =
        tick ? std::max<std::int64_t>(1, 20'000'000 / std::max<std::int64_t>(1, work_per_round(s)))
             : 0;
    const auto N = static_cast<std::size_t>(s.n());
    const bool push_sum = s.kind() == WeightKind::push_sum;
    Rng rng(seed);
    std::vector<double> x(N), w(N, 1.0), tmp(N);
    for (auto& v : x) v = rng.normal();
    const double true_mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(N);
    auto disagreement = [&] {
        double mean = true_mean;
        if (!push_sum) mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(N);
        double sq = 0;
        for (std::size_t i = 0; i < N; ++i) {
            const double d = (push_sum ? x[i] / w[i] : x[i]) - mean;
            sq += d * d;
        }
        return std::sqrt(sq);
    };
    const double d0 = disagreement();
    if (d0 == 0.0) return;
    for (std::int64_t t = 0; t < max_rounds; ++t) {
        auto round = s.at(t);
        round->weights.apply(x, tmp);
        x.swap(tmp);
        if (push_sum) {
            round->weights.apply(w, tmp);
            w.swap(tmp);
        }
        const double rel = disagreement() / d0;
        if (!step(t + 1, rel)) return;
        if (tick_every > 0 && (t + 1) % tick_every == 0) tick(t + 1, rel);
    }
}

}  // namespace

std::optional<std::int64_t> rounds_to_consensus(const Schedule& s, double target,
                                                std::int64_t max_rounds, std::uint64_t seed) {
    if (s.n() == 1) return 0;
    std::optional<std::int64_t> reached;
    averaging_run(s, max_rounds, seed, [&](std::int64_t t, double rel) {
        if (rel <= target) reached = t;
        return !reached;
    });
    return reached;
}

std::vector<double> consensus_curve(const Schedule& s, std::int64_t rounds, std::uint64_t seed,
                                    double stop_below) {
    std::vector<double> curve{1.0};
    if (s.n() == 1) return curve;
    averaging_run(s, rounds, seed, [&](std::int64_t, double rel) {
        curve.push_back(rel);
        return rel >= stop_below;
    });
    return curve;
}

Report analyse(const Schedule& s, const AnalysisOptions& o) {
    Report r;
    r.description = s.describe();
    r.n = s.n();
    r.period = s.period();
    r.kind = s.kind();
    r.target = o.target;
    r.max_rounds = o.max_rounds;
    r.model_bytes = o.model_bytes;
    r.rounds_examined = r.period ? *r.period : o.sample_rounds;
    const auto N = static_cast<std::size_t>(r.n);

    say(o, fmt::format("examining {} round{} of {}", r.rounds_examined,
                       r.rounds_examined == 1 ? "" : "s", r.description));
    r.row_stochastic = r.column_stochastic = r.symmetric = true;
    r.min_in_degree = r.min_out_degree = r.n;
    std::vector<Digraph> graphs;
    std::vector<double> sent(N, 0.0);
    double out_degree_sum = 0;
    for (std::int64_t t = 0; t < r.rounds_examined; ++t) {
        auto round = s.at(t);
        const Digraph& g = round->graph;
        const MixingMatrix& w = round->weights;
        r.directed = r.directed || !g.symmetric();
        r.row_stochastic = r.row_stochastic && w.row_stochastic();
        r.column_stochastic = r.column_stochastic && w.column_stochastic();
        r.symmetric = r.symmetric && w.symmetric();
        r.connected_rounds += strongly_connected(g) ? 1 : 0;
        for (int i = 0; i < r.n; ++i) {
            const int in = g.in_degree(i), out = g.out_degree(i);
            r.min_in_degree = std::min(r.min_in_degree, in);
            r.max_in_degree = std::max(r.max_in_degree, in);
            r.min_out_degree = std::min(r.min_out_degree, out);
            r.max_out_degree = std::max(r.max_out_degree, out);
            sent[static_cast<std::size_t>(i)] +=
                static_cast<double>(out) * static_cast<double>(o.model_bytes);
            out_degree_sum += out;
        }
        graphs.push_back(g);
    }
    r.max_degree = std::max(r.max_in_degree, r.max_out_degree);
    const auto rounds = static_cast<double>(r.rounds_examined);
    r.mean_out_degree = out_degree_sum / (rounds * r.n);
    r.bytes_per_round_max = *std::max_element(sent.begin(), sent.end()) / rounds;
    r.bytes_per_round_mean = std::accumulate(sent.begin(), sent.end(), 0.0) / (rounds * r.n);
    std::vector<const Digraph*> ptrs;
    for (const auto& g : graphs) ptrs.push_back(&g);
    r.strongly_connected = strongly_connected(graph_union(ptrs));

    if (!r.period) {
        // No period: estimate the per-round contraction from sampled averaging runs
        // (geometric mean over three start vectors, stopped before rounding error dominates).
        say(o,
            fmt::format("estimating the per-round rate from {} sampled rounds", o.sample_rounds));
        double log_rate = 0;
        for (std::uint64_t k = 0; k < 3; ++k) {
            double last = 1.0;
            std::int64_t rounds_run = 0;
            averaging_run(s, o.sample_rounds, derive_seed(o.seed, k),
                          [&](std::int64_t t, double rel) {
                              if (rel > 0) {
                                  last = rel;
                                  rounds_run = t;
                              }
                              return rel > 1e-12;
                          });
            log_rate += rounds_run > 0 ? std::log(std::max(last, 1e-300)) / rounds_run : 0.0;
        }
        r.rate_per_round = std::exp(log_rate / 3);
        r.slem = r.rate_per_round;
        r.spectral_gap = 1.0 - *r.slem;
        r.spectral_estimate = true;
    } else if (r.n > o.dense_limit) {
        r.spectral_note =
            fmt::format("skipped: n = {} is above the dense limit {}", r.n, o.dense_limit);
    } else {
        say(o, fmt::format("computing the spectrum of the {}x{} product over {} round{}", r.n, r.n,
                           *r.period, *r.period == 1 ? "" : "s"));
        r.slem = slem(round_product(s, 0, *r.period), r.n);
        if (*r.slem < 1e-12) r.slem = 0.0;  // rounding noise of an exactly averaging product
        r.spectral_gap = 1.0 - *r.slem;
        r.rate_per_round = std::pow(*r.slem, 1.0 / static_cast<double>(*r.period));
    }

    // The averaging run costs rounds x (nonzeros + n): a ring of 65,535 peers would take
    // minutes for the default million rounds, so a large n gets fewer, and the report says so.
    r.max_rounds = o.max_rounds;
    if (o.max_work > 0) {
        const auto per_round = work_per_round(s);
        const auto affordable = std::max<std::int64_t>(1, o.max_work / per_round);
        if (affordable < r.max_rounds) {
            r.max_rounds = affordable;
            r.rounds_note = fmt::format(
                "averaging run bounded to {} rounds for n = {}, about {:.0e} multiply-adds; "
                "give --max-rounds to run longer",
                affordable, r.n, static_cast<double>(o.max_work));
        }
    }
    say(o, fmt::format("running an averaging run to {:g} (at most {} rounds)", o.target,
                       r.max_rounds));
    std::function<void(std::int64_t, double)> tick;
    if (o.update)
        tick = [&](std::int64_t t, double rel) {
            o.update(
                fmt::format("averaging run: round {} of at most {}, disagreement {:.2e} "
                            "(target {:g})",
                            t, r.max_rounds, rel, o.target));
        };
    if (r.n > 1)
        averaging_run(
            s, r.max_rounds, o.seed,
            [&](std::int64_t t, double rel) {
                if (rel <= o.target) r.rounds_to_target = t;
                return !r.rounds_to_target;
            },
            tick);
    else
        r.rounds_to_target = 0;
    return r;
}

json::Json to_json(const Report& r) {
    auto opt = [](const auto& v) { return v ? json::Json(*v) : json::Json(nullptr); };
    return json::Json{
        {"description", r.description},
        {"n", r.n},
        {"period", opt(r.period)},
        {"rounds_examined", r.rounds_examined},
        {"weights_kind", std::string(to_string(r.kind))},
        {"directed", r.directed},
        {"strongly_connected", r.strongly_connected},
        {"connected_rounds", r.connected_rounds},
        {"row_stochastic", r.row_stochastic},
        {"column_stochastic", r.column_stochastic},
        {"symmetric", r.symmetric},
        {"slem", opt(r.slem)},
        {"spectral_gap", opt(r.spectral_gap)},
        {"rate_per_round", opt(r.rate_per_round)},
        {"spectral_estimate", r.spectral_estimate},
        {"spectral_note", r.spectral_note},
        {"rounds_to_1e-6", r.target == 1e-6 ? opt(r.rounds_to_target) : json::Json(nullptr)},
        {"rounds_to_target", opt(r.rounds_to_target)},
        {"target", r.target},
        {"max_rounds", r.max_rounds},
        {"rounds_note", r.rounds_note},
        {"max_degree", r.max_degree},
        {"in_degree", {{"min", r.min_in_degree}, {"max", r.max_in_degree}}},
        {"out_degree",
         {{"min", r.min_out_degree}, {"max", r.max_out_degree}, {"mean", r.mean_out_degree}}},
        {"model_bytes", r.model_bytes},
        {"bytes_per_round", {{"max", r.bytes_per_round_max}, {"mean", r.bytes_per_round_mean}}},
    };
}

std::string to_text(const Report& r) {
    auto yes = [](bool b) { return b ? "yes" : "no"; };
    std::string out;
    auto line = [&](std::string_view key, const std::string& value) {
        out += fmt::format("  {:<22} {}\n", key, value);
    };
    out += r.description + "\n";
    line("peers", std::to_string(r.n));
    line("period", r.period ? std::to_string(*r.period)
                            : fmt::format("none (random; {} rounds sampled)", r.rounds_examined));
    line("weights",
         fmt::format("{}{}{}{}", to_string(r.kind), r.row_stochastic ? ", row-stochastic" : "",
                     r.column_stochastic ? ", column-stochastic" : "",
                     r.symmetric ? ", symmetric" : ""));
    line("directed", yes(r.directed));
    line("strongly connected", fmt::format("{} (union over {} round{}; {} round{} connected alone)",
                                           yes(r.strongly_connected), r.rounds_examined,
                                           r.rounds_examined == 1 ? "" : "s", r.connected_rounds,
                                           r.connected_rounds == 1 ? "" : "s"));
    if (r.slem) {
        const bool per_period = r.period && *r.period > 1;
        line(r.spectral_estimate ? "SLEM (estimate)"
             : per_period        ? "SLEM (period product)"
                                 : "SLEM",
             fmt::format("{:.6f}", *r.slem));
        line("spectral gap", fmt::format("{:.6f}", *r.spectral_gap));
        if (per_period) line("rate per round", fmt::format("{:.6f}", *r.rate_per_round));
    } else {
        line("SLEM", r.spectral_note);
    }
    line(fmt::format("rounds to {:g}", r.target),
         r.rounds_to_target ? std::to_string(*r.rounds_to_target)
                            : fmt::format("not reached in {} rounds{}", r.max_rounds,
                                          r.rounds_note.empty() ? "" : " (" + r.rounds_note + ")"));
    line("degree (in)", fmt::format("{}..{}", r.min_in_degree, r.max_in_degree));
    line("degree (out)", fmt::format("{}..{} (mean {:.2f})", r.min_out_degree, r.max_out_degree,
                                     r.mean_out_degree));
    line("sent per round",
         fmt::format("{} max, {} mean per peer (model {})", format_bytes(r.bytes_per_round_max),
                     format_bytes(r.bytes_per_round_mean),
                     format_bytes(static_cast<double>(r.model_bytes))));
    return out;
}

std::string to_comparison_table(const std::vector<std::string>& labels,
                                const std::vector<Report>& reports) {
    std::size_t width = 8;
    for (const auto& l : labels) width = std::max(width, l.size());
    std::string out =
        fmt::format("{:<{}}  {:>5} {:>6} {:>8} {:>9} {:>9} {:>9} {:>10} {:>6} {:>12}\n", "topology",
                    width, "peers", "period", "directed", "SLEM", "gap", "rate/rnd", "rnds 1e-6",
                    "degree", "sent/round");
    for (std::size_t i = 0; i < reports.size(); ++i) {
        const Report& r = reports[i];
        auto num = [](const std::optional<double>& v) {
            return v ? fmt::format("{:.4f}", *v) : std::string("-");
        };
        out += fmt::format(
            "{:<{}}  {:>5} {:>6} {:>8} {:>9} {:>9} {:>9} {:>10} {:>6} {:>12}\n", labels[i], width,
            r.n, r.period ? std::to_string(*r.period) : std::string("rand"),
            r.directed ? "yes" : "no", num(r.slem) + (r.spectral_estimate ? "~" : ""),
            num(r.spectral_gap), num(r.rate_per_round),
            r.rounds_to_target ? std::to_string(*r.rounds_to_target)
                               : fmt::format(">{}", r.max_rounds),
            r.max_degree, format_bytes(r.bytes_per_round_max));
    }
    return out;
}

}  // namespace gossamer::topology
