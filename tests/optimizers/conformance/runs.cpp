// Runs and comparisons for the conformance checks (runs.hpp).
#include "optimizers/conformance/runs.hpp"

#include <fmt/format.h>

#include <cstring>
#include <exception>

#include "optimizers/harness/workers.hpp"

namespace gossamer::conformance {

Outcome run(const Candidate& c, const Job& job, const testing::HarnessOptions& options,
            const HarnessHook& before, const HarnessHook& after, const testing::Peers* custom) {
    Outcome out;
    try {
        testing::Harness h(custom ? *custom : peers(c, job), options);
        if (before) before(h);
        out.done = h.run();
        out.sent = h.sent();
        out.early = h.delivered_while_stepping();
        for (int r = 0; r < h.size(); ++r) {
            out.models.push_back(h.model(r));
            out.steps.push_back(static_cast<std::int64_t>(h.losses(r).size()));
            if (h.alive(r)) out.mass += h.protocol(r).mass();
        }
        if (after) after(h);
    } catch (const std::exception& e) {
        out.error = e.what();
    }
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

namespace {

bool same_double(double a, double b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

// The first header field or payload that differs ("" when none).
std::string differing_part(const proto::Message& a, const proto::Message& b) {
    if (a.kind != b.kind) return "kind";
    if (a.sender != b.sender || a.receiver != b.receiver) return "sender or receiver";
    if (a.edge_seq != b.edge_seq) return "edge_seq";
    if (a.round != b.round) return "round";
    if (a.partition != b.partition || a.chunk != b.chunk || a.offset != b.offset)
        return "partition, chunk or offset";
    if (a.codec != b.codec) return "codec";
    if (!same_double(a.weight, b.weight)) return "weight";
    if (!same_double(a.sent_at, b.sent_at)) return "sent_at";
    if (a.elements != b.elements || a.placed != b.placed) return "elements";
    if (!same_bits(a.payload, b.payload)) return "payload";
    return "";
}

}  // namespace

std::string first_difference(const std::vector<proto::Message>& a,
                             const std::vector<proto::Message>& b) {
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        if (const auto part = differing_part(a[i], b[i]); !part.empty())
            return fmt::format("message {} ({} -> {}, round {}): its {}", i, a[i].sender,
                               a[i].receiver, a[i].round, part);
    if (a.size() != b.size()) return fmt::format("{} messages, then {}", a.size(), b.size());
    return "";
}

bool holds_mass(const Candidate& c, const Job& job) {
    testing::QuadraticWorker worker(std::vector<float>(job.dim));
    return c.make(nullptr, {0, job.n, job.topology, &worker, job.steps})->held_mass() > 0;
}

std::string resume_refusal(const Candidate& c, const Job& job) {
    testing::QuadraticWorker worker(std::vector<float>(job.dim));
    return c.make(nullptr, {0, job.n, job.topology, &worker, job.steps})->resume_refusal();
}

}  // namespace gossamer::conformance
