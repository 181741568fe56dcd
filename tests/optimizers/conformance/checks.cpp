// The checks of the contract (contract.hpp): each runs one candidate through the harness and
// reports what breaks the contract.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <exception>

#include "gossamer/core/error.hpp"
#include "optimizers/conformance/contract.hpp"
#include "optimizers/conformance/runs.hpp"
#include "optimizers/harness/layers.hpp"
#include "optimizers/harness/workers.hpp"

namespace gossamer::conformance {

using testing::Harness;

Report same_seed_same_bytes(const Candidate& c) {
    Report rep;
    const Job job = job_for(c);
    const auto o = harness_options(job);
    const Outcome a = run(c, job, o), b = run(c, job, o);
    if (!a.error.empty()) {
        rep.findings.push_back("the run threw: " + a.error);
        return rep;
    }
    if (!a.done) rep.findings.push_back("not every peer finished its steps");
    if (const auto diff = first_difference(a.sent, b.sent); !diff.empty())
        rep.findings.push_back(
            fmt::format("two runs with seed {} send different bytes: {}", job.seed, diff));
    for (int r = 0; r < job.n; ++r)
        if (!same_bits(a.models[static_cast<std::size_t>(r)],
                       b.models[static_cast<std::size_t>(r)]))
            rep.findings.push_back(fmt::format(
                "rank {} ends with another model in a second run of seed {}", r, job.seed));
    rep.note =
        fmt::format("{} messages compared byte for byte ({})", a.sent.size(), job.topology_label);
    return rep;
}

Report order_independent(const Candidate& c) {
    Report rep;
    const Job job = job_for(c);
    if (holds_mass(c, job)) {
        rep.note =
            "push-sum: it absorbs shares in the order they arrive, so its models depend "
            "on that order (not compared)";
        return rep;
    }
    auto o = harness_options(job);
    const Outcome a = run(c, job, o);
    o.seed = job.seed + 1;
    const Outcome b = run(c, job, o);
    for (const Outcome* x : {&a, &b})
        if (!x->error.empty()) {
            rep.findings.push_back("the run threw: " + x->error);
            return rep;
        }
    if (first_difference(a.sent, b.sent).empty())
        rep.findings.push_back("two seeds gave the same order of messages: nothing was compared");
    for (int r = 0; r < job.n; ++r)
        if (!same_bits(a.models[static_cast<std::size_t>(r)],
                       b.models[static_cast<std::size_t>(r)]))
            rep.findings.push_back(fmt::format(
                "rank {} of an averaging protocol ends with another model when its messages "
                "arrive in another order (seeds {} and {})",
                r, job.seed, job.seed + 1));
    rep.note = "averaging: the same models, bit for bit, for two orders of its messages";
    return rep;
}

Report ownership(const Candidate& c) {
    Report rep;
    const Job job = job_for(c);
    const auto o = harness_options(job);
    const Outcome plain = run(c, job, o);
    testing::Peers guarded = peers(c, job);
    guarded.worker_layers.push_back([](std::unique_ptr<proto::LocalWorker> w, int) {
        return std::make_unique<testing::GuardedWorker>(std::move(w));
    });
    const auto poison = [](Harness& h) {
        h.on_step_start = [&h](int r, std::int64_t) {
            dynamic_cast<testing::GuardedWorker&>(h.worker(r)).poison();
        };
    };
    const Outcome g = run(c, job, o, poison, {}, &guarded);
    if (!plain.error.empty()) {
        rep.findings.push_back("the run threw: " + plain.error);
        return rep;
    }
    if (g.error.rfind("harness: ", 0) == 0) {
        rep.findings.push_back("the ownership rule: " + g.error);
        return rep;
    }
    if (!g.error.empty()) {
        rep.findings.push_back(
            "the ownership rule: it read the gradient buffer while a step ran (poisoned then "
            "with NaN, the run threw: " +
            g.error + ")");
        return rep;
    }
    for (int r = 0; r < job.n; ++r)
        if (!same_bits(plain.models[static_cast<std::size_t>(r)],
                       g.models[static_cast<std::size_t>(r)])) {
            rep.findings.push_back(fmt::format(
                "the ownership rule: rank {} read the gradient buffer while a step ran (poisoned "
                "then, its model differs from the unpoisoned run's)",
                r));
            break;
        }
    // A protocol whose rule never overlaps steps and messages (gadmm's alternation) gets none
    // while a step runs: the writes and the poisoned reads are still checked at every step.
    rep.note = fmt::format("{} messages arrived while a step ran", g.early);
    return rep;
}

Report neighbour_failure(const Candidate& c) {
    Report rep;
    const Job job = job_for(c);
    const auto o = harness_options(job);
    const int dead = 2;
    const double at = 0.5 * static_cast<double>(job.steps) * o.step_time + 0.3;
    std::vector<std::optional<int>> named(static_cast<std::size_t>(job.n));
    const Outcome out = run(
        c, job, o, [&](Harness& h) { h.kill(dead, at); },
        [&](Harness& h) {
            for (int r = 0; r < job.n; ++r)
                named[static_cast<std::size_t>(r)] = failure_named(h.protocol(r));
        });
    if (!out.error.empty()) {
        rep.findings.push_back(fmt::format("after rank {} failed: {}", dead, out.error));
        return rep;
    }
    if (!out.done)
        rep.findings.push_back(fmt::format(
            "after rank {} failed a survivor hangs: nothing is pending and it is not done", dead));
    int went_on = 0, stopped = 0;
    for (int r = 0; r < job.n; ++r) {
        if (r == dead) continue;
        const auto i = static_cast<std::size_t>(r);
        if (out.steps[i] == job.steps) {
            ++went_on;
            for (float v : out.models[i])
                if (!std::isfinite(v)) {
                    rep.findings.push_back(fmt::format("rank {} went on to a non-finite model", r));
                    break;
                }
            continue;
        }
        ++stopped;
        if (named[i] != dead)
            rep.findings.push_back(fmt::format(
                "rank {} stopped after {} of {} steps without naming the failed rank {}", r,
                out.steps[i], job.steps, dead));
    }
    if (went_on > 0 && stopped > 0)
        rep.findings.push_back(fmt::format(
            "after rank {} failed {} survivors went on and {} stopped", dead, went_on, stopped));
    rep.note = stopped > 0 ? fmt::format("every survivor stopped, naming rank {}", dead)
                           : fmt::format("every survivor took its {} steps", job.steps);
    return rep;
}

Report bad_options(const Candidate& c) {
    Report rep;
    const Job job = job_for(c);
    testing::QuadraticWorker worker(std::vector<float>(job.dim));
    const proto::PeerContext ctx{0, job.n, job.topology, &worker, job.steps};
    const auto build = [&](const char* text) {
        const json::Node node(json::parse_text(text, "options.json"));
        return c.make(&node, ctx);
    };
    try {
        build("{}");
    } catch (const std::exception& e) {
        rep.findings.push_back(std::string("{} (the defaults) is refused: ") + e.what());
    }
    struct Bad {
        const char* text;
        const char* named;  // what the line must name
    };
    for (const Bad bad : {Bad{R"({"no_such_option": 1})", "no_such_option"}, Bad{"[1]", ""},
                          Bad{R"("fast")", ""}}) {
        try {
            build(bad.text);
            rep.findings.push_back(fmt::format("options {} are accepted", bad.text));
        } catch (const ConfigError& e) {
            const std::string line = e.what();
            if (line.find('\n') != std::string::npos)
                rep.findings.push_back(
                    fmt::format("the error for options {} is not one line: {}", bad.text, line));
            if (line.find(bad.named) == std::string::npos)
                rep.findings.push_back(fmt::format("the error for options {} does not name {}: {}",
                                                   bad.text, bad.named, line));
            if (rep.note.empty()) rep.note = line;
        } catch (const std::exception& e) {
            rep.findings.push_back(fmt::format(
                "options {} throw something other than a ConfigError: {}", bad.text, e.what()));
        }
    }
    return rep;
}

Report checkpoint_round_trip(const Candidate& c) {
    Report rep;
    const Job job = job_for(c);
    if (const auto why = resume_refusal(c, job); !why.empty()) {
        rep.note = "does not resume: " + why;
        return rep;
    }
    const std::int64_t every = job.steps / 2;
    auto o = harness_options(job);
    o.checkpoint_every = every;
    std::vector<proto::Snapshot> cut(static_cast<std::size_t>(job.n));
    const Outcome whole = run(c, job, o, {}, [&](Harness& h) {
        for (int r = 0; r < job.n; ++r)
            for (const auto& s : h.snapshots(r))
                if (s.step == every) cut[static_cast<std::size_t>(r)] = s;
    });
    if (!whole.error.empty()) {
        rep.findings.push_back("the run with checkpoints threw: " + whole.error);
        return rep;
    }
    for (int r = 0; r < job.n; ++r)
        if (cut[static_cast<std::size_t>(r)].step != every) {
            rep.findings.push_back(fmt::format("rank {} took no snapshot at step {}", r, every));
            return rep;
        }
    o.checkpoint_every = 0;
    const Outcome resumed = run(c, job, o, [&](Harness& h) {
        for (int r = 0; r < job.n; ++r) h.restore(r, cut[static_cast<std::size_t>(r)]);
    });
    if (!resumed.error.empty()) {
        rep.findings.push_back(fmt::format("resuming at step {} threw: {}", every, resumed.error));
        return rep;
    }
    if (!resumed.done) rep.findings.push_back("after a resume not every peer finished its steps");
    if (holds_mass(c, job)) {
        const double n = job.n, before = resumed.mass;
        if (std::abs(before - n) > 1e-9)
            rep.findings.push_back(fmt::format(
                "resumed at step {} the peers end with mass {} of {}", every, before, n));
        rep.note = fmt::format("push-sum: resumed at step {}, the mass exact", every);
        return rep;
    }
    for (int r = 0; r < job.n; ++r)
        if (!same_bits(whole.models[static_cast<std::size_t>(r)],
                       resumed.models[static_cast<std::size_t>(r)])) {
            rep.findings.push_back(fmt::format(
                "rank {} resumed at step {} ends with another model than without the stop", r,
                every));
            break;
        }
    rep.note = fmt::format("resumed at step {}: the same models, bit for bit", every);
    return rep;
}

Report mass_exact(const Candidate& c) {
    Report rep;
    const Job job = job_for(c);
    if (!holds_mass(c, job)) {
        rep.note = "holds no mass (an averaging protocol)";
        return rep;
    }
    double worst = 0;
    std::int64_t events = 0;
    const Outcome out = run(c, job, harness_options(job), [&](Harness& h) {
        h.after_event = [&] {
            double total = 0;
            for (int r = 0; r < h.size(); ++r) total += h.protocol(r).held_mass();
            for (const proto::Message* m : h.in_flight()) total += m->weight;
            worst = std::max(worst, std::abs(total - job.n));
            ++events;
        };
    });
    if (!out.error.empty()) {
        rep.findings.push_back("the run threw: " + out.error);
        return rep;
    }
    if (worst > 1e-9)
        rep.findings.push_back(fmt::format(
            "the mass held plus the mass in flight strayed {:.3g} from n = {}", worst, job.n));
    if (std::abs(out.mass - job.n) > 1e-9)
        rep.findings.push_back(fmt::format("the peers end with mass {} of {}", out.mass, job.n));
    rep.note =
        fmt::format("sum of held_mass and in flight = {} after each of {} events", job.n, events);
    return rep;
}

Report layered(const Candidate& c) {
    Report rep;
    const Job job = job_for(c);
    const auto o = harness_options(job);
    testing::Peers wrapped = peers(c, job);
    wrapped.protocol_layers.push_back(testing::pass_through());
    const Outcome plain = run(c, job, o), layer = run(c, job, o, {}, {}, &wrapped);
    for (const Outcome* x : {&plain, &layer})
        if (!x->error.empty()) {
            rep.findings.push_back("the run threw: " + x->error);
            return rep;
        }
    if (const auto diff = first_difference(plain.sent, layer.sent); !diff.empty())
        rep.findings.push_back("under a pass-through layer it sends other bytes: " + diff);
    for (int r = 0; r < job.n; ++r)
        if (!same_bits(plain.models[static_cast<std::size_t>(r)],
                       layer.models[static_cast<std::size_t>(r)])) {
            rep.findings.push_back(
                fmt::format("under a pass-through layer rank {} ends with another model", r));
            break;
        }
    rep.note = fmt::format("{} messages the same under a pass-through layer", layer.sent.size());
    return rep;
}

}  // namespace gossamer::conformance
