// The questions drivers ask of the registry by name (questions.hpp), with their default answers.
#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"

namespace gossamer::proto {

bool default_options(const json::Node* options) noexcept {
    return !options || (options->is_object() && options->value().empty());
}

int max_in_degree(const topology::Schedule& t) {
    const std::int64_t rounds = std::min<std::int64_t>(t.period().value_or(64), 64);
    int most = 0;
    for (std::int64_t r = 0; r < rounds; ++r) {
        const auto round = t.at(r);
        for (int i = 0; i < t.n(); ++i) most = std::max(most, round->graph.in_degree(i));
    }
    return most;
}

std::string join_names(const std::vector<std::string>& names, std::string_view word,
                       bool serial_comma) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0 && i + 1 < names.size()) out += ", ";
        if (i > 0 && i + 1 == names.size())
            out += fmt::format("{} {} ", names.size() > 2 && serial_comma ? "," : "", word);
        out += names[i];
    }
    return out;
}

std::string elastic_refusal(std::string_view name) {
    if (const auto* a = find_algorithm(name); a && a->elastic != Elastic::never) return "";
    return fmt::format(
        "algorithm {} cannot join, leave or rejoin a running job yet ({} can: "
        "docs/operations/elastic.md)",
        name, join_names(elastic_algorithms(true, true), "and"));
}

std::vector<std::string> elastic_algorithms(bool with_option, bool notes) {
    std::vector<const Algorithm*> elastic;
    for (const auto& a : algorithms())
        if (a.elastic != Elastic::never && (with_option || a.elastic != Elastic::by_option))
            elastic.push_back(&a);
    std::stable_sort(elastic.begin(), elastic.end(), [](const Algorithm* a, const Algorithm* b) {
        return a->elastic < b->elastic;
    });
    std::vector<std::string> names;
    for (const auto* a : elastic)
        names.push_back(notes && !a->elastic_note.empty() ? a->name + " " + a->elastic_note
                                                          : a->name);
    return names;
}

std::string elastic_choice() {
    for (const auto& a : algorithms())
        if (a.elastic == Elastic::always) return a.name;
    return "";
}

void check_churn(std::string_view name, const JobSetup& setup) {
    if (const auto* a = find_algorithm(name); a && a->check_churn) a->check_churn(setup);
}

std::vector<std::string> per_partition_algorithms() {
    std::vector<std::string> names;
    for (const auto& a : algorithms())
        if (a.per_partition_gossip) names.push_back(a.name);
    return names;
}

void check_multirate_algorithm(const optim::Multirate& m, std::string_view name) {
    const auto* a = find_algorithm(name);
    if ((a && a->per_partition_gossip) || !m.per_partition_gossip() || !m.source) return;
    const auto those = per_partition_algorithms();
    const json::Node parts = m.source->at("partitions");
    for (std::size_t id = 0; id < m.count(); ++id) {
        const auto& r = m.rate(id);
        if (r.gossip_period == 1 && !r.compressor) continue;
        const json::Node entry = parts.at(m.layout()[id].name);
        const std::string what =
            r.compressor ? "a compressor" : fmt::format("gossip period {}", r.gossip_period);
        entry.fail(fmt::format("{} gossips the whole model every round, so partition \"{}\" "
                               "cannot have {} (per-partition gossip is a {} feature)",
                               name, m.layout()[id].name, what, join_names(those, "and")),
                   fmt::format("run {}, or set \"gossip_period\": 1 and drop \"compressor\"",
                               join_names(those, "or")));
    }
}

std::string outer_refusal(std::string_view name, const json::Node* options) {
    const auto* a = find_algorithm(name);
    return a && a->outer_refusal ? a->outer_refusal(options) : std::string();
}

void check_outer_algorithm(const std::optional<optim::OuterOptions>& outer, std::string_view name,
                           const json::Node* options, const std::string& config_file) {
    if (!outer || outer->identity()) return;
    const std::string why = outer_refusal(name, options);
    if (!why.empty())
        throw ConfigError(
            config_file, "outer", why,
            fmt::format("drop \"outer\", or run {}", join_names(outer_algorithms(), "or")));
    // Streaming fragments sync one a sub-round: only per-partition gossip sends one alone.
    const auto* a = find_algorithm(name);
    if (outer->fragments > 1 && a && !a->per_partition_gossip) {
        std::vector<std::string> those;
        for (const auto& n : per_partition_algorithms())
            if (outer_refusal(n, nullptr).empty()) those.push_back(n);
        throw ConfigError(
            config_file, "outer.fragments",
            fmt::format("{} sends the whole model every round, so {} fragments cannot sync one "
                        "at a time (streaming fragments are a {} feature)",
                        name, outer->fragments, join_names(those, "and")),
            fmt::format("run {}, or drop \"fragments\" (or set it to 1)", join_names(those, "or")));
    }
}

std::vector<std::string> outer_algorithms() {
    std::vector<std::string> out;
    for (const auto& a : algorithms())
        if (!a.outer_refusal || a.outer_refusal(nullptr).empty()) out.push_back(a.name);
    return out;
}

double wait_per_step(std::string_view name, const JobSetup& setup, double latency) {
    const auto* a = find_algorithm(name);
    return a && a->wait_per_step ? a->wait_per_step(setup, latency) : 0.0;
}

double model_copies(std::string_view name, const JobSetup& setup) {
    if (const auto* a = find_algorithm(name); a && a->model_copies) return a->model_copies(setup);
    return 1 + 3.0 * max_in_degree(*setup.topology);
}

std::optional<double> resync_timeout(std::string_view name, const json::Node* options) {
    const auto* a = find_algorithm(name);
    if (!a || !a->resync_timeout) return std::nullopt;
    return a->resync_timeout(options);
}

}  // namespace gossamer::proto
