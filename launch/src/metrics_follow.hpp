#pragma once
// Reading the peers' metrics files (docs/modules/peer.md, "Metrics") while they grow: the steps,
// the summary and the evaluation points of gossamer launch's progress line and time-to-target
// column, for peer processes and for --inproc threads alike.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer::launch {

namespace fs = std::filesystem;

/// One evaluation point of a peer's own model.
struct EvalAt {
    double time = 0, accuracy = 0;
    double loss = std::numeric_limits<double>::quiet_NaN();  ///< NaN: the line had none
};

/// Follows one peer's metrics file (docs/modules/peer.md, Metrics) as it grows.
struct Follower {
    fs::path path;
    std::streamoff offset = 0;
    std::string partial;
    std::int64_t steps = 0;
    std::optional<json::Json> summary;
    std::map<std::int64_t, EvalAt> evals;  // tick -> its evaluation
    // The live view (live.hpp): from the step lines.
    double time = 0, busy = 0, idle = 0;  // seconds: the last step's end, steps, waits
    std::map<int, double> waited;         // neighbour -> seconds of waits its message ended

    void read() {
        std::ifstream in(path, std::ios::binary);
        if (!in) return;
        in.seekg(offset);
        std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        offset += static_cast<std::streamoff>(chunk.size());
        partial += chunk;
        for (auto nl = partial.find('\n'); nl != std::string::npos; nl = partial.find('\n')) {
            const std::string line = partial.substr(0, nl);
            partial.erase(0, nl + 1);
            if (line.find("\"summary\"") != std::string::npos) {
                auto j = json::Json::parse(line, nullptr, false);
                if (!j.is_discarded() && j.value("summary", false)) summary = std::move(j);
            } else if (line.find("\"eval\"") != std::string::npos) {
                auto j = json::Json::parse(line, nullptr, false);
                if (j.is_object() && j["eval"].is_number_integer() && j["time"].is_number() &&
                    j["accuracy"].is_number())
                    evals[j["eval"].get<std::int64_t>()] = {
                        j["time"].get<double>(), j["accuracy"].get<double>(),
                        j.contains("loss") && j["loss"].is_number()
                            ? j["loss"].get<double>()
                            : std::numeric_limits<double>::quiet_NaN()};
            } else if (line.find("\"step\"") != std::string::npos) {
                ++steps;
                step_line(line);
            }
        }
    }

  private:
    void step_line(const std::string& line) {
        const auto j = json::Json::parse(line, nullptr, false);
        if (!j.is_object()) return;
        time = j.value("time", time);
        busy += j.value("step_seconds", 0.0);
        const double w = j.value("wait", 0.0);
        idle += w;
        if (const int from = j.value("waited_for", -1); from >= 0) waited[from] += w;
    }
};

/// The mean accuracy (or, with `loss`, the mean loss) of the peers' models at tick k: the peers
/// evaluated at it, and those that finished (a summary) at their latest evaluation before it,
/// as their model is final (sim evaluates finished peers too). Peers that failed, or have no
/// evaluation yet, do not count. nullopt when nobody counts.
inline std::optional<double> mean_accuracy_at(const std::vector<Follower>& peers, std::int64_t k,
                                              bool loss = false) {
    double sum = 0;
    int count = 0;
    const auto value = [&](const EvalAt& e) { return loss ? e.loss : e.accuracy; };
    for (const auto& f : peers) {
        if (const auto it = f.evals.find(k); it != f.evals.end()) {
            sum += value(it->second);
            ++count;
        } else if (f.summary) {
            auto before = f.evals.lower_bound(k);
            if (before == f.evals.begin()) continue;
            sum += value(std::prev(before)->second);
            ++count;
        }
    }
    if (count == 0) return std::nullopt;
    return sum / count;
}

/// The first tick at which the mean accuracy of the peers' models (mean_accuracy_at) reached
/// `target` (with `loss`: the first at which their mean loss fell to `target` or below: a
/// validation loss at most X, docs/operations/cli.md). Until 2026-12-06 finished peers dropped out
/// of the mean: under async on uneven8 the slow rank 7 alone made the "mean" of the last 60 s
/// (docs/operations/lab.md).
inline std::optional<double> time_to_target(const std::vector<Follower>& peers, double target,
                                            bool loss = false) {
    std::map<std::int64_t, double> ticks;  // tick -> time
    for (const auto& f : peers)
        for (const auto& [k, e] : f.evals) ticks[k] = e.time;
    for (const auto& [k, time] : ticks)
        if (const auto mean = mean_accuracy_at(peers, k, loss);
            mean && (loss ? *mean <= target : *mean >= target))
            return time;
    return std::nullopt;
}

}  // namespace gossamer::launch
