// The handshake's settings: canonical forms are digested, descriptions stay short. A value is
// digested from what the peer will run (the schedule's rounds, the parsed rates), not from the
// file's text, so two files that say the same thing agree and one that differs in any round
// does not.
#include "gossamer/peer/settings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "gossamer/optimizers/compress/compressor.hpp"

namespace gossamer::peer {
namespace {

// Rounds digested from a schedule: one period (at most this many), or for a random schedule
// without a period this many from round 0 (each is a function of the seed and t).
constexpr std::int64_t kMaxRounds = 4096;
constexpr std::int64_t kRandomRounds = 64;

std::string fix_for(SettingSource source, const char* cli, const char* api) {
    return source == SettingSource::cli ? cli : api;
}

std::string file_name(const std::string& path) {
    return std::filesystem::path(path).filename().string();
}

// A JSON value in one canonical text (nlohmann keeps object keys sorted): absent, null and {}
// are the same "defaults".
std::string canonical(const json::Json* v) {
    if (!v || v->is_null() || (v->is_object() && v->empty())) return "defaults";
    return v->dump();
}

std::string shown(const json::Json* v) {
    const auto c = canonical(v);
    return c == "defaults" ? "the defaults" : c;
}

const json::Json* member(const optim::TrainingConfig& c, const char* key) {
    if (!c.doc.root || !c.doc.root->is_object()) return nullptr;
    const json::Json& root = *c.doc.root;
    auto it = root.find(key);
    return it == root.end() ? nullptr : &*it;
}

}  // namespace

void add_topology_settings(std::vector<Setting>& out, const topology::Topology& t,
                           SettingSource source) {
    const topology::Schedule& s = *t.schedule;
    const auto period = s.period();
    const std::int64_t rounds =
        period ? std::min<std::int64_t>(*period, kMaxRounds) : kRandomRounds;
    bootstrap::Digest graph, weights;
    graph.u64(static_cast<std::uint64_t>(s.n()))
        .u64(period ? static_cast<std::uint64_t>(*period) : 0);
    if (!period) graph.text(s.describe());  // the family and its seed
    weights.text(topology::to_string(s.kind())).text(topology::to_string(t.weights));
    for (std::int64_t r = 0; r < rounds; ++r) {
        const auto round = s.at(r);
        graph.u64(round->graph.edges().size());
        for (const auto& e : round->graph.edges())
            graph.u64(static_cast<std::uint64_t>(e.from)).u64(static_cast<std::uint64_t>(e.to));
        for (int i = 0; i < round->weights.n(); ++i) {
            weights.u64(static_cast<std::uint64_t>(i)).u64(round->weights.row(i).size());
            for (const auto& w : round->weights.row(i))
                weights.u64(static_cast<std::uint64_t>(w.col)).f64(w.weight);
        }
    }
    const std::string from = t.source.empty() ? "" : " in " + file_name(t.source);
    const auto fix = fix_for(source, "start every peer with the same topology file",
                             "give every peer the same PeerOptions::topology file");
    out.push_back(
        bootstrap::make_setting("topology graph", graph.value(), s.describe() + from, fix));
    out.push_back(
        bootstrap::make_setting("topology weights", weights.value(),
                                fmt::format("{} weights ({}){}", topology::to_string(t.weights),
                                            topology::to_string(s.kind()), from),
                                fix));
}

void add_algorithm_settings(std::vector<Setting>& out, const std::string& algorithm,
                            const json::Json* options, SettingSource source) {
    out.push_back(
        bootstrap::make_setting("algorithm", algorithm, algorithm,
                                fix_for(source, "start every peer with the same --algorithm",
                                        "give every peer the same PeerOptions::algorithm")));
    out.push_back(bootstrap::make_setting(
        "algorithm options", canonical(options), algorithm + " with " + shown(options),
        fix_for(source, "give every peer the same \"algorithms\" section in its training config",
                "give every peer the same PeerOptions::algorithm_options")));
}

void add_partition_settings(std::vector<Setting>& out, const optim::Multirate& m,
                            SettingSource source) {
    const auto fix =
        fix_for(source, "give every peer the same \"multirate\" section in its training config",
                "give every peer the same PeerOptions::partitions");
    if (!m.active()) {  // rates that change nothing agree with none at all
        out.push_back(
            bootstrap::make_setting("partitions", "every step", "every partition every step", fix));
        return;
    }
    bootstrap::Digest d;
    d.text(m.backward() == optim::BackwardMode::skip ? "skip" : "full").u64(m.count());
    std::string value;
    for (std::size_t id = 0; id < m.count(); ++id) {
        const auto& r = m.rate(id);
        const std::string& name = m.layout()[id].name;
        d.text(name).u64(static_cast<std::uint64_t>(r.period));
        d.u64(static_cast<std::uint64_t>(r.gossip_period)).u64(r.compressor ? 1 : 0);
        if (r.compressor)
            d.text(optim::to_string(r.compressor->kind))
                .u64(r.compressor->block)
                .f64(r.compressor->fraction)
                .u64(r.compressor->seed);
        if (r.period == 1 && r.gossip_period == 1 && !r.compressor) continue;
        value += fmt::format(
            "{}{} (period {}, gossip period {}{})", value.empty() ? "" : ", ", name, r.period,
            r.gossip_period,
            r.compressor ? ", " + std::string(optim::to_string(r.compressor->kind)) : "");
    }
    if (m.backward() == optim::BackwardMode::full) value += ", backward full";
    out.push_back(bootstrap::make_setting("partitions", d.value(), value, fix));
}

void add_training_settings(std::vector<Setting>& out, const optim::TrainingConfig& c, int epochs) {
    const std::string config = "start every peer with the same training config";
    out.push_back(bootstrap::make_setting("epochs", std::to_string(epochs),
                                          fmt::format("{} epochs", epochs),
                                          config + " and --epochs"));
    out.push_back(bootstrap::make_setting("batch size", std::to_string(c.batch_size),
                                          fmt::format("batch size {}", c.batch_size), config));
    const auto& sh = c.sharding;
    bootstrap::Digest sd;
    sd.u64(sh.mode == ShardMode::iid ? 0 : sh.mode == ShardMode::dirichlet ? 1 : 2);
    std::string shard = sh.mode == ShardMode::iid ? std::string("iid")
                        : sh.mode == ShardMode::contiguous
                            ? std::string("contiguous")
                            : fmt::format("dirichlet alpha {}", sh.alpha);
    if (sh.mode == ShardMode::dirichlet) sd.f64(sh.alpha);
    sd.u64(sh.sizes.size());
    for (double z : sh.sizes) sd.f64(z);
    if (!sh.sizes.empty()) shard += fmt::format(", sizes {}", fmt::join(sh.sizes, " "));
    out.push_back(bootstrap::make_setting("sharding", sd.value(), shard, config));
    out.push_back(bootstrap::make_setting("seed", std::to_string(c.seed),
                                          fmt::format("seed {}", c.seed), config));
    // The data set without its folder: the same files may live elsewhere on another host.
    const auto& dc = c.data;
    // Text: the file's name only; its content shows in the model's vocabulary digest.
    const std::string data =
        dc.is_text()
            ? fmt::format(
                  "{} ({}{} chars, stride {}, context {})", dc.name,
                  dc.file.empty() ? "" : std::filesystem::path(dc.file).filename().string() + ", ",
                  dc.chars, dc.stride, dc.context)
        : dc.name == "fashion-mnist"
            ? fmt::format("{} (train limit {}, test limit {})", dc.name, dc.train_limit,
                          dc.test_limit)
            : fmt::format("{} ({} samples, {} test, {} features, noise {}, seed {})", dc.name,
                          dc.samples, dc.test_samples, dc.features, dc.noise, dc.seed);
    out.push_back(bootstrap::make_setting("data set", data, data, config));
    const json::Json* model = member(c, "model");
    out.push_back(bootstrap::make_setting("model", canonical(model), shown(model), config));
    json::Json opt = json::Json::object();
    if (const auto* o = member(c, "optimizer")) opt["optimizer"] = *o;
    if (const auto* s = member(c, "schedule")) opt["schedule"] = *s;
    out.push_back(bootstrap::make_setting("optimizer", canonical(&opt), shown(&opt), config));
    // The outer layer (docs/algorithms/outer.md): every peer must take the same rounds.
    const std::string outer = c.outer ? c.outer->describe() : "none";
    out.push_back(bootstrap::make_setting("outer", outer, c.outer ? "outer " + outer : "no outer",
                                          config + " (its \"outer\" section)"));
}

void add_cluster_setting(std::vector<Setting>& out, const std::string& path) {
    const std::string fix = "start every peer with the same --cluster file, or none";
    if (path.empty()) {
        out.push_back(bootstrap::make_setting("cluster file", "none", "no cluster file", fix));
        return;
    }
    const auto doc = json::load_file(path);
    out.push_back(bootstrap::make_setting("cluster file", doc.root->dump(), file_name(path), fix));
}

void add_final_average_setting(std::vector<Setting>& out, bool exact_average) {
    out.push_back(bootstrap::make_setting("final average", exact_average ? "exact" : "barrier",
                                          exact_average ? "the exact average" : "no exact average",
                                          "give every peer the same PeerOptions::exact_average"));
}

void add_outer_setting(std::vector<Setting>& out, const std::optional<optim::OuterOptions>& outer,
                       const std::string& fix_field) {
    const std::string d = outer ? outer->describe() : "none";
    out.push_back(bootstrap::make_setting("outer", d, outer ? "outer " + d : "no outer",
                                          "give every peer the same " + fix_field));
}

}  // namespace gossamer::peer
