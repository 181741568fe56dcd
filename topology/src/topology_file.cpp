#include "gossamer/topology/topology_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "gossamer/core/error.hpp"
#include "gossamer/topology/build_size.hpp"

namespace gossamer::topology {
namespace {

using json::Node;

constexpr const char* kSmallerTopology =
    "use fewer peers, or a sparse family (ring, torus, exponential, one_peer_exponential)";

std::vector<PeerAddress> parse_peers(const Node& peers) {
    std::vector<PeerAddress> out;
    if (peers.is_object()) {
        peers.expect_object({"count", "host", "hosts", "base_port"});
        const auto count = peers.at("count").as_int(1, 1 << 20);
        // "hosts": the ranks in blocks over several hosts, ports from base_port on each (a
        // cluster's nodes, or a simulation past one host's 65535 ports).
        std::vector<std::string> hosts;
        if (const auto h = peers.find("hosts")) {
            if (peers.has("host"))
                h->fail("both \"host\" and \"hosts\" are given", "keep one of them");
            if (!h->is_array() || h->size() == 0)
                h->fail("expected a non-empty list of host names");
            std::map<std::string, std::size_t> seen;
            for (std::size_t i = 0; i < h->size(); ++i) {
                const Node e = (*h)[i];
                std::string name = e.as_string();
                if (name.empty()) e.fail("empty host name", "give a host name or address");
                if (auto it = seen.find(name); it != seen.end())
                    e.fail(fmt::format("duplicate host {} (also hosts[{}])", name, it->second),
                           "list every host once");
                seen.emplace(name, i);
                hosts.push_back(std::move(name));
            }
        } else {
            hosts.push_back(peers.find("host") ? peers.at("host").as_string() : "127.0.0.1");
        }
        const auto per_host = (count + static_cast<std::int64_t>(hosts.size()) - 1) /
                              static_cast<std::int64_t>(hosts.size());
        const auto base = peers.find("base_port") ? peers.at("base_port").as_int(1, 65535) : 29500;
        if (base + per_host - 1 > 65535) {
            // Name only what the file says: a base_port it does not give is not the culprit.
            const bool given = peers.has("base_port");
            const std::string spread = hosts.size() == 1 ? ""
                                                         : fmt::format(" ({} per host on {} hosts)",
                                                                       per_host, hosts.size());
            std::string fix =
                per_host > 65535
                    ? "at most 65535 peers fit on one host's ports; lower count, or spread the "
                      "peers over several hosts with \"hosts\": [...]"
                    : fmt::format(
                          "lower count to {} or less{}",
                          (65535 - base + 1) * static_cast<std::int64_t>(hosts.size()),
                          given ? fmt::format(", or base_port to {} or less", 65535 - per_host + 1)
                                : fmt::format(", or give a base_port of {} or less",
                                              65535 - per_host + 1));
            peers.at("count").fail(fmt::format("count {}{}: peers on ports {}..{}{} run past 65535",
                                               count, spread, base, base + per_host - 1,
                                               given ? "" : " (from the default base_port 29500)"),
                                   fix);
        }
        for (std::int64_t r = 0; r < count; ++r)
            out.push_back({hosts[static_cast<std::size_t>(r / per_host)],
                           static_cast<int>(base + r % per_host)});
        return out;
    }
    if (!peers.is_array())
        peers.fail("expected a list of {\"host\", \"port\"} objects or {\"count\": N}");
    if (peers.size() == 0)
        peers.fail("the peer list is empty", "list at least one peer, or use {\"count\": N}");
    std::map<std::string, std::size_t> seen;
    for (std::size_t r = 0; r < peers.size(); ++r) {
        Node p = peers[r];
        p.expect_object({"host", "port"});
        PeerAddress a{p.at("host").as_string(), static_cast<int>(p.at("port").as_int(1, 65535))};
        if (a.host.empty()) p.at("host").fail("empty host name", "give a host name or address");
        const std::string key = fmt::format("{}:{}", a.host, a.port);
        if (auto it = seen.find(key); it != seen.end())
            p.fail(fmt::format("duplicate address {} (also peers[{}])", key, it->second),
                   "give every peer its own host:port");
        seen.emplace(key, r);
        out.push_back(std::move(a));
    }
    return out;
}

// One edge list of the file: [from, to] or [from, to, weight].
struct ParsedEdges {
    std::vector<Edge> edges;       // both directions when undirected
    std::vector<Triplet> weights;  // explicit weights only, incl. self-weights
};

ParsedEdges parse_edges(const Node& list, int n, bool directed, bool explicit_weights) {
    ParsedEdges out;
    list.expect_array();
    std::map<std::pair<int, int>, std::size_t> seen;
    for (std::size_t k = 0; k < list.size(); ++k) {
        Node e = list[k];
        e.expect_array();
        if (e.size() != 2 && e.size() != 3)
            e.fail(fmt::format("an edge has {} elements", e.size()),
                   "write [from, to] or, with explicit weights, [from, to, weight]");
        auto rank = [&](std::size_t i) {
            Node r = e[i];
            auto v = r.as_int();
            if (v < 0 || v >= n)
                r.fail(fmt::format("rank {} is out of range for {} peers", v, n),
                       fmt::format("ranks run from 0 to {}", n - 1));
            return static_cast<int>(v);
        };
        const int from = rank(0), to = rank(1);
        if (explicit_weights && e.size() != 3)
            e.fail("missing weight", "explicit weights need [from, to, weight] on every edge");
        if (!explicit_weights && e.size() == 3)
            e[2].fail("an edge weight needs explicit weights",
                      "remove the weight, or set \"weights\": {\"rule\": \"explicit\", \"kind\": "
                      "\"averaging\"}");
        if (from == to && !explicit_weights)
            e.fail(fmt::format("self-loop {} -> {}", from, to),
                   "remove it: the self weight comes from the weight rule");
        auto key =
            directed ? std::pair{from, to} : std::pair{std::min(from, to), std::max(from, to)};
        if (auto it = seen.find(key); it != seen.end())
            e.fail(fmt::format("duplicate edge {} {} {} (also at {}[{}])", from,
                               directed ? "->" : "--", to, list.path(), it->second),
                   "list each edge once");
        seen.emplace(key, k);
        double w = 0.0;
        if (explicit_weights) {
            w = e[2].as_double();
            if (w < 0.0) e[2].fail(fmt::format("weight {} is negative", w), "use a weight >= 0");
        }
        if (from != to) {
            out.edges.push_back({from, to});
            if (!directed) out.edges.push_back({to, from});
        }
        if (explicit_weights) {
            out.weights.push_back({to, from, w});  // receiver `to` weighs sender `from`
            if (!directed && from != to) out.weights.push_back({from, to, w});
        }
    }
    return out;
}

// Builds a round and checks its weights, naming `where` on failure.
Round make_checked_round(const Node& where, int n, ParsedEdges edges, WeightRule rule,
                         WeightKind kind) {
    Digraph g(n, std::move(edges.edges));
    MixingMatrix w;
    try {
        w = rule == WeightRule::explicit_weights ? MixingMatrix(n, std::move(edges.weights))
                                                 : make_weights(g, rule);
        check_weights(w, kind);
    } catch (const TopologyError& e) {
        where.fail(e.what(), rule == WeightRule::explicit_weights
                                 ? "fix the weights, including the self-loops [i, i, w]"
                                 : "choose another weight rule");
    }
    return Round{std::move(g), std::move(w)};
}

std::shared_ptr<const Schedule> parse_family(const Node& graph, int n, WeightRule rule,
                                             FamilySpec& spec) {
    const Node fam = graph.at("family");
    std::vector<std::string> names(family_names().begin(), family_names().end());
    spec.family = fam.as_string();
    if (!is_family(spec.family)) {
        auto near = json::closest(spec.family, names);
        std::string all;
        for (const auto& f : names) all += (all.empty() ? "" : ", ") + f;
        fam.fail(fmt::format("unknown family \"{}\"", spec.family),
                 near ? fmt::format("did you mean \"{}\"? families: {}", *near, all)
                      : "families: " + all);
    }
    const std::string& f = spec.family;
    if (f == "torus")
        graph.expect_object({"family", "rows", "cols"});
    else if (f == "erdos_renyi")
        graph.expect_object({"family", "p", "seed"});
    else if (f == "random_matching")
        graph.expect_object({"family", "seed"});
    else
        graph.expect_object({"family"});
    spec.n = n;
    spec.weights = rule;
    if (auto s = graph.find("seed")) spec.seed = static_cast<std::uint64_t>(s->as_int(0));
    if (auto r = graph.find("rows")) spec.rows = static_cast<int>(r->as_int(1, n));
    if (auto c = graph.find("cols")) spec.cols = static_cast<int>(c->as_int(1, n));
    if (f == "erdos_renyi") {
        Node p = graph.at("p");
        spec.p = p.as_double();
        if (spec.p <= 0.0 || spec.p > 1.0) p.fail("p must be in (0, 1]", "use e.g. 0.3");
    }
    // n alone says what the family costs: refuse a size the machine cannot build before
    // building it (a complete graph of 36,000 peers is 1.3 billion edges).
    try {
        check_build_size(family_size(spec), fmt::format("the {} graph of {} peers", f, n), "", "",
                         kSmallerTopology);
    } catch (const ConfigError& e) {
        fam.fail(e.problem(), e.fix());
    }
    try {
        return generate(spec);
    } catch (const TopologyError& e) {
        fam.fail(e.what());
    }
}

}  // namespace

Topology parse_topology(const json::Document& doc) {
    Node root(doc);
    root.expect_object({"version", "name", "description", "peers", "graph", "weights"});
    if (auto v = root.find("version")) v->as_int(1, 1);
    if (auto v = root.find("name")) v->as_string();
    if (auto v = root.find("description")) v->as_string();

    Topology topo;
    topo.source = doc.file;
    topo.peers = parse_peers(root.at("peers"));
    {
        const Node peers = root.at("peers");
        topo.count_only = peers.is_object() && !peers.has("host") && !peers.has("hosts") &&
                          !peers.has("base_port");
    }
    const int n = topo.n();

    // Weights: "uniform" or {"rule": "explicit", "kind": "averaging" | "push_sum"}.
    WeightKind kind = WeightKind::averaging;
    std::string rule_name = "uniform";
    if (auto w = root.find("weights")) {
        const std::initializer_list<std::string_view> rules = {
            "uniform", "metropolis_hastings", "max_degree", "push_sum", "explicit"};
        if (w->is_object()) {
            w->expect_object({"rule", "kind"});
            rule_name = w->at("rule").as_enum(rules);
            if (auto k = w->find("kind")) {
                const std::string ks = k->as_enum({"averaging", "push_sum"});
                kind = ks == "push_sum" ? WeightKind::push_sum : WeightKind::averaging;
                if (rule_name != "explicit" && kind != kind_of(*parse_weight_rule(rule_name)))
                    k->fail(fmt::format("rule {} makes {} weights", rule_name,
                                        to_string(kind_of(*parse_weight_rule(rule_name)))),
                            "drop \"kind\" or use explicit weights");
            } else if (rule_name == "explicit") {
                w->fail("explicit weights must declare their kind",
                        "add \"kind\": \"averaging\" (rows sum to 1) or \"push_sum\" (columns "
                        "sum to 1)");
            }
        } else {
            rule_name = w->as_enum(rules);
            if (rule_name == "explicit")
                w->fail("explicit weights must declare their kind",
                        "write {\"rule\": \"explicit\", \"kind\": \"averaging\"} or "
                        "\"push_sum\"");
        }
    }
    topo.weights = *parse_weight_rule(rule_name);
    if (topo.weights != WeightRule::explicit_weights) kind = kind_of(topo.weights);
    const bool explicit_w = topo.weights == WeightRule::explicit_weights;

    const Node graph = root.at("graph");
    if (!graph.is_object())
        graph.fail("expected an object with \"family\", \"edges\" or \"schedule\"");
    const int forms = graph.has("family") + graph.has("edges") + graph.has("schedule");
    if (forms != 1)
        graph.fail("give exactly one of \"family\", \"edges\" or \"schedule\"",
                   "see docs/formats/topology-format.md");
    if (graph.has("family")) {
        if (explicit_w)
            root.at("weights").fail("a generated family cannot have explicit weights",
                                    "use a weight rule, or list the edges");
        FamilySpec spec;
        topo.schedule = parse_family(graph, n, topo.weights, spec);
        topo.family = spec;
        return topo;
    }

    graph.expect_object({"edges", "schedule", "directed"});
    const bool directed = graph.find("directed") ? graph.at("directed").as_bool() : false;
    std::vector<Round> rounds;
    std::vector<Node> where;
    if (graph.has("edges")) {
        where.push_back(graph.at("edges"));
    } else {
        Node sched = graph.at("schedule");
        sched.expect_array(1);
        where = sched.elements();
    }
    // The edge lists' lengths say what the graphs and weights will cost: check before building.
    BuildSize size;
    size.n = n;
    for (const Node& list : where) {
        const double edges =
            static_cast<double>(list.is_array() ? list.size() : 0) * (directed ? 1 : 2);
        size.round_edges = std::max(size.round_edges, edges);
        size.total_edges += edges;
    }
    try {
        check_build_size(size,
                         where.size() == 1
                             ? fmt::format("a graph of {} peers", n)
                             : fmt::format("a schedule of {} rounds on {} peers", where.size(), n),
                         "", "", "list fewer edges, or use fewer peers");
    } catch (const ConfigError& e) {
        graph.fail(e.problem(), e.fix());
    }
    for (const Node& list : where)
        rounds.push_back(make_checked_round(list, n, parse_edges(list, n, directed, explicit_w),
                                            topo.weights, kind));

    std::vector<const Digraph*> graphs;
    for (const auto& r : rounds) graphs.push_back(&r.graph);
    const Digraph u = graph_union(graphs);
    if (!strongly_connected(u)) {
        const int parts = strong_component_count(u);
        graph.fail(rounds.size() == 1
                       ? fmt::format("the graph is not strongly connected ({} components)", parts)
                       : fmt::format("the schedule is never connected over its period: the union "
                                     "of its {} rounds has {} strongly connected components",
                                     rounds.size(), parts),
                   "add edges that join the components");
    }
    const std::string desc =
        rounds.size() == 1 ? fmt::format("explicit edges (n = {})", n)
                           : fmt::format("explicit schedule (n = {}, period {})", n, rounds.size());
    topo.schedule = make_periodic(std::move(rounds), kind, desc);
    return topo;
}

Topology load_topology(const std::string& path) {
    return parse_topology(json::load_file(path));
}

json::Json family_topology_json(const FamilySpec& spec, const LocalPeers& peers) {
    json::Json graph = {{"family", spec.family}};
    if (spec.family == "torus") {
        if (spec.rows) graph["rows"] = spec.rows;
        if (spec.cols) graph["cols"] = spec.cols;
    }
    if (spec.family == "erdos_renyi") graph["p"] = spec.p;
    if (spec.family == "erdos_renyi" || spec.family == "random_matching") graph["seed"] = spec.seed;
    return json::Json{
        {"version", 1},
        {"peers", {{"count", spec.n}, {"host", peers.host}, {"base_port", peers.base_port}}},
        {"graph", graph},
        {"weights", std::string(to_string(spec.weights))},
    };
}

}  // namespace gossamer::topology
