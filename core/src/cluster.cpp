#include "gossamer/core/cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include "cluster_churn.hpp"
#include "gossamer/core/error.hpp"

namespace gossamer {
namespace {

using json::Node;

constexpr const char* kBandwidthFix = "give bytes per second, e.g. 1.25e9 for 10 Gbit/s";
constexpr const char* kLatencyFix = "give seconds, e.g. 5e-6";

// The upper end of every range (docs/formats/cluster-format.md, "Ranges"): one line naming the
// range.
void check_upper(const Node& v, double x, std::string_view name, std::string_view range, double hi,
                 std::string_view unit) {
    if (x > hi)
        v.fail(fmt::format("{} {:g}{} is out of range; it must lie in {}, {:g}]{}", name, x, unit,
                           range, hi, unit),
               fmt::format("use at most {:g}{} (docs/formats/cluster-format.md, \"Ranges\")", hi,
                           unit));
}

double read_positive(const Node& v, std::string_view name, double hi, std::string_view unit,
                     std::string_view fix) {
    const double x = v.as_double();
    if (x <= 0.0)
        v.fail(fmt::format("{} must be > 0{}, found {}", name, unit, x), std::string(fix));
    check_upper(v, x, name, "(0", hi, unit);
    return x;
}

double read_non_negative(const Node& v, std::string_view name, double hi, std::string_view unit,
                         std::string_view fix) {
    const double x = v.as_double();
    if (x < 0.0) v.fail(fmt::format("{} must be >= 0, found {}", name, x), std::string(fix));
    check_upper(v, x, name, "[0", hi, unit);
    return x;
}

double read_bandwidth(const Node& v, std::string_view name) {
    const double x = read_positive(v, name, kMaxBandwidth, " bytes/s", kBandwidthFix);
    if (x < kMinBandwidth)
        v.fail(fmt::format("{} {:g} bytes/s is out of range; it must lie in [{:g}, {:g}] bytes/s",
                           name, x, kMinBandwidth, kMaxBandwidth),
               kBandwidthFix);
    return x;
}

// The declared step time base_time x factor of a peer after `by` set one of them: at most a
// day, so that padding and virtual times stay meaningful.
void check_step_time(const PeerSpec& p, const Node& by, std::string_view who) {
    const double t = p.base_time * p.factor;
    if (t <= kMaxStepTime) return;
    const Node at = by.has("factor") ? by.at("factor") : by.at("base_time");
    at.fail(fmt::format("{} steps take base_time x factor = {:g} x {:g} = {:g} s; a declared step "
                        "time must lie in (0, {:g}] seconds (a day)",
                        who, p.base_time, p.factor, t, kMaxStepTime),
            "lower base_time or factor (docs/formats/cluster-format.md, \"Ranges\")");
}

int read_rank(const Node& v, int n) {
    const auto r = v.as_int();
    if (r < 0 || r >= n)
        v.fail(fmt::format("rank {} is out of range for {} peers", r, n),
               fmt::format("ranks run from 0 to {}", n - 1));
    return static_cast<int>(r);
}

Jitter parse_jitter(const Node& j) {
    if (!j.is_object())
        j.fail("expected an object such as {\"distribution\": \"lognormal\", \"sigma\": 0.5}");
    Jitter out;
    const std::string d = j.at("distribution").as_enum({"constant", "lognormal", "uniform"});
    if (d == "constant") {
        j.expect_object({"distribution"});
    } else if (d == "lognormal") {
        j.expect_object({"distribution", "sigma"});
        out.kind = JitterKind::lognormal;
        out.sigma = read_non_negative(j.at("sigma"), "sigma", kMaxSigma, "",
                                      "use e.g. 0.5; 0 means no jitter");
    } else {
        j.expect_object({"distribution", "width"});
        out.kind = JitterKind::uniform;
        const Node w = j.at("width");
        out.width = w.as_double();
        if (out.width < 0.0 || out.width >= 1.0)
            w.fail(fmt::format("width must be in [0, 1), found {}", out.width),
                   "use e.g. 0.2 for step times within 20% of the mean");
    }
    return out;
}

std::vector<SlowPeriod> parse_slow(const Node& list) {
    list.expect_array();
    std::vector<std::pair<SlowPeriod, Node>> periods;
    for (const Node& p : list.elements()) {
        p.expect_object({"from", "to", "factor"});
        SlowPeriod s;
        s.from = read_non_negative(p.at("from"), "from", kMaxTimePoint, " seconds",
                                   "give the virtual time in seconds at which the period starts");
        if (auto to = p.find("to")) {
            s.to = to->as_double();
            check_upper(*to, s.to, "to", "[0", kMaxTimePoint, " seconds");
            if (s.to <= s.from)
                to->fail(fmt::format("the slow period ends at {} but starts at {}", s.to, s.from),
                         "make \"to\" greater than \"from\", or drop \"to\" for a period that "
                         "never ends");
        }
        const Node f = p.at("factor");
        s.factor = f.as_double();
        if (s.factor < 1.0)
            f.fail(fmt::format("slow factor {} is below 1", s.factor),
                   "use a factor >= 1 (2 = half speed); to make a peer faster, lower its "
                   "\"factor\"");
        check_upper(f, s.factor, "slow factor", "[1", kMaxFactor, "");
        periods.emplace_back(s, p);
    }
    std::stable_sort(periods.begin(), periods.end(),
                     [](const auto& a, const auto& b) { return a.first.from < b.first.from; });
    for (std::size_t i = 1; i < periods.size(); ++i) {
        const SlowPeriod &a = periods[i - 1].first, &b = periods[i].first;
        if (b.from < a.to)
            periods[i].second.fail(fmt::format("this slow period overlaps the one at {}",
                                               periods[i - 1].second.path()),
                                   "make the periods disjoint, or merge them into one");
    }
    std::vector<SlowPeriod> out;
    for (auto& p : periods) out.push_back(p.first);
    return out;
}

// The per-peer keys a defaults block or a peer override may set.
constexpr std::array<std::string_view, 10> kPeerFields = {
    "base_time", "factor",  "jitter",  "slow",     "uplink",
    "downlink",  "fail_at", "join_at", "leave_at", "rejoin_at"};

// The values one block sets; unset ones leave the peer as it is.
struct Patch {
    std::optional<Time> base_time;
    std::optional<double> factor;
    std::optional<Jitter> jitter;
    std::optional<std::vector<SlowPeriod>> slow;
    std::optional<double> uplink, downlink;
    std::optional<Time> fail_at, join_at, leave_at, rejoin_at;

    void apply(PeerSpec& p) const {
        if (base_time) p.base_time = *base_time;
        if (factor) p.factor = *factor;
        if (jitter) p.jitter = *jitter;
        if (slow) p.slow = *slow;
        if (uplink) p.uplink = *uplink;
        if (downlink) p.downlink = *downlink;
        if (fail_at) p.fail_at = *fail_at;
        if (join_at) p.join_at = *join_at;
        if (leave_at) p.leave_at = *leave_at;
        if (rejoin_at) p.rejoin_at = *rejoin_at;
    }
};

Patch parse_patch(const Node& obj) {
    Patch out;
    if (auto v = obj.find("base_time"))
        out.base_time = read_positive(*v, "base_time", kMaxStepTime, " seconds",
                                      "give the seconds one local step takes, e.g. 0.05");
    if (auto v = obj.find("factor"))
        out.factor = read_positive(*v, "factor", kMaxFactor, "",
                                   "use 1 for a nominal peer, 4 for one four times slower");
    if (auto v = obj.find("jitter")) out.jitter = parse_jitter(*v);
    if (auto v = obj.find("slow")) out.slow = parse_slow(*v);
    if (auto v = obj.find("uplink")) out.uplink = read_bandwidth(*v, "uplink");
    if (auto v = obj.find("downlink")) out.downlink = read_bandwidth(*v, "downlink");
    // Points in virtual time: when the peer fails, enters, leaves and comes back.
    struct TimePoint {
        const char* key;
        std::optional<Time> Patch::*field;
        const char* fix;
    };
    static constexpr TimePoint kTimes[] = {
        {"fail_at", &Patch::fail_at,
         "give the virtual time in seconds at which the peer stops, or drop \"fail_at\" for a "
         "peer that never fails"},
        {"join_at", &Patch::join_at,
         "give the virtual time in seconds at which the peer enters the running job, or drop "
         "\"join_at\" (0: from the start)"},
        {"leave_at", &Patch::leave_at,
         "give the virtual time in seconds at which the peer leaves gracefully, or drop "
         "\"leave_at\""},
        {"rejoin_at", &Patch::rejoin_at,
         "give the virtual time in seconds at which the crashed peer comes back, or drop "
         "\"rejoin_at\""},
    };
    for (const auto& t : kTimes)
        if (auto v = obj.find(t.key))
            out.*t.field = read_non_negative(*v, t.key, kMaxTimePoint, " seconds", t.fix);
    return out;
}

// The ranks a peer override names: exactly one of "rank", "ranks" or "range".
std::vector<int> parse_selector(const Node& entry, int n) {
    const int forms = entry.has("rank") + entry.has("ranks") + entry.has("range");
    if (forms != 1)
        entry.fail("give exactly one of \"rank\", \"ranks\" or \"range\"",
                   "e.g. \"rank\": 3, \"ranks\": [0, 5] or \"range\": [8, 15]");
    std::vector<int> out;
    if (auto r = entry.find("rank")) {
        out.push_back(read_rank(*r, n));
    } else if (auto rs = entry.find("ranks")) {
        rs->expect_array(1);
        for (const Node& e : rs->elements()) {
            const int r = read_rank(e, n);
            if (std::find(out.begin(), out.end(), r) != out.end())
                e.fail(fmt::format("rank {} is listed twice", r), "list each rank once");
            out.push_back(r);
        }
    } else {
        const Node range = entry.at("range");
        range.expect_array();
        if (range.size() != 2)
            range.fail(fmt::format("a range has {} elements", range.size()),
                       "write [first, last], both included");
        const int first = read_rank(range[0], n), last = read_rank(range[1], n);
        if (first > last)
            range.fail(fmt::format("the range [{}, {}] is empty", first, last),
                       "write [first, last] with first <= last");
        for (int r = first; r <= last; ++r) out.push_back(r);
    }
    return out;
}

void parse_peers(const Node& list, std::vector<PeerSpec>& peers) {
    const int n = static_cast<int>(peers.size());
    list.expect_array();
    // owner[r][field]: the entry that set this field of rank r, to refuse a second setting.
    std::vector<std::array<int, kPeerFields.size()>> owner(peers.size());
    for (auto& o : owner) o.fill(-1);
    for (std::size_t k = 0; k < list.size(); ++k) {
        const Node entry = list[k];
        entry.expect_object({"rank", "ranks", "range", "base_time", "factor", "jitter", "slow",
                             "uplink", "downlink", "fail_at", "join_at", "leave_at", "rejoin_at"});
        const std::vector<int> ranks = parse_selector(entry, n);
        const Patch patch = parse_patch(entry);
        bool sets_any = false;
        for (std::size_t f = 0; f < kPeerFields.size(); ++f) {
            if (!entry.has(kPeerFields[f])) continue;
            sets_any = true;
            for (int r : ranks) {
                if (const int j = owner[r][f]; j >= 0)
                    entry.at(kPeerFields[f])
                        .fail(fmt::format("rank {} already has \"{}\" from {}[{}]", r,
                                          kPeerFields[f], list.path(), j),
                              "set each value of a rank once");
                owner[r][f] = static_cast<int>(k);
            }
        }
        if (!sets_any)
            entry.fail("the override sets nothing",
                       "add one of base_time, factor, jitter, slow, uplink, downlink, fail_at, "
                       "join_at, leave_at, rejoin_at");
        for (int r : ranks) {
            patch.apply(peers[r]);
            if (patch.base_time || patch.factor)
                check_step_time(peers[r], entry, fmt::format("rank {}'s", r));
        }
    }
    // The churn fields of one rank may come from different entries: checked together at the end,
    // each error at the entry that set the field it names.
    check_churn(peers, [&](int r, std::string_view field) {
        const auto f = static_cast<std::size_t>(
            std::find(kPeerFields.begin(), kPeerFields.end(), field) - kPeerFields.begin());
        return list[static_cast<std::size_t>(owner[static_cast<std::size_t>(r)][f])].at(field);
    });
}

void parse_links(const Node& list, int n, const LinkSpec& base,
                 std::map<std::pair<int, int>, LinkSpec>& links) {
    list.expect_array();
    // Which entry set the latency (first) and the bandwidth (second) of a directed link.
    std::map<std::pair<int, int>, std::pair<int, int>> owner;
    for (std::size_t k = 0; k < list.size(); ++k) {
        const Node entry = list[k];
        entry.expect_object({"from", "to", "between", "latency", "bandwidth"});
        std::vector<std::pair<int, int>> pairs;
        if (entry.has("between")) {
            if (entry.has("from") || entry.has("to"))
                entry.fail("give either \"from\" and \"to\" or \"between\", not both",
                           "\"between\": [a, b] sets both directions");
            const Node b = entry.at("between");
            b.expect_array();
            if (b.size() != 2)
                b.fail(fmt::format("\"between\" has {} elements", b.size()), "write [a, b]");
            const int x = read_rank(b[0], n), y = read_rank(b[1], n);
            if (x == y)
                b.fail(fmt::format("a link from peer {} to itself", x),
                       "remove it: a peer does not send to itself");
            pairs = {{x, y}, {y, x}};
        } else {
            const int x = read_rank(entry.at("from"), n), y = read_rank(entry.at("to"), n);
            if (x == y)
                entry.fail(fmt::format("a link from peer {} to itself", x),
                           "remove it: a peer does not send to itself");
            pairs = {{x, y}};
        }
        std::optional<Time> latency;
        std::optional<double> bandwidth;
        if (auto v = entry.find("latency"))
            latency = read_non_negative(*v, "latency", kMaxLatency, " seconds", kLatencyFix);
        if (auto v = entry.find("bandwidth")) bandwidth = read_bandwidth(*v, "bandwidth");
        if (!latency && !bandwidth)
            entry.fail("the override sets neither latency nor bandwidth",
                       "add \"latency\" or \"bandwidth\"");
        for (const auto& p : pairs) {
            auto [it, fresh] = owner.try_emplace(p, -1, -1);
            auto check = [&](bool sets, int& who, std::string_view field) {
                if (!sets) return;
                if (who >= 0)
                    entry.at(field).fail(fmt::format("link {} -> {} already has \"{}\" from {}[{}]",
                                                     p.first, p.second, field, list.path(), who),
                                         "set each value of a link once");
                who = static_cast<int>(k);
            };
            check(latency.has_value(), it->second.first, "latency");
            check(bandwidth.has_value(), it->second.second, "bandwidth");
            LinkSpec& l = links.try_emplace(p, base).first->second;
            if (latency) l.latency = *latency;
            if (bandwidth) l.bandwidth = *bandwidth;
        }
    }
}

void parse_racks(const Node& list, Cluster& c) {
    list.expect_array();
    const int n = c.n();
    c.rack_of.assign(static_cast<std::size_t>(n), -1);
    for (std::size_t k = 0; k < list.size(); ++k) {
        const Node entry = list[k];
        entry.expect_object({"rank", "ranks", "range", "uplink", "downlink"});
        RackSpec rack;
        rack.ranks = parse_selector(entry, n);
        std::sort(rack.ranks.begin(), rack.ranks.end());
        for (int r : rack.ranks)
            if (const int j = c.rack_of[static_cast<std::size_t>(r)]; j >= 0)
                entry.fail(fmt::format("rank {} is already in rack {}[{}]", r, list.path(), j),
                           "put every rank in at most one rack");
        rack.uplink = read_bandwidth(entry.at("uplink"), "uplink");
        rack.downlink =
            entry.has("downlink") ? read_bandwidth(entry.at("downlink"), "downlink") : rack.uplink;
        for (int r : rack.ranks) c.rack_of[static_cast<std::size_t>(r)] = static_cast<int>(k);
        c.racks.push_back(std::move(rack));
    }
}

Cluster parse_resolved(const json::Document& doc, int n) {
    Node root(doc);
    root.expect_object({"version", "name", "description", "n", "defaults", "peers", "network"});
    if (auto v = root.find("version")) v->as_int(1, 1);
    if (auto v = root.find("name")) v->as_string();
    if (auto v = root.find("description")) v->as_string();
    if (auto v = root.find("n"); v && v->as_int(1) != n)
        v->fail(fmt::format("the cluster is written for {} peers but the topology has {}",
                            v->as_int(), n),
                fmt::format("use a topology of {} peers, or drop \"n\" if the cluster fits any",
                            v->as_int()));

    Cluster c;
    c.source = doc.file;
    const Node net = root.at("network");
    net.expect_object({"latency", "bandwidth", "links", "racks", "model", "failure_detection"});
    if (auto d = net.find("failure_detection"))
        c.failure_detection = read_non_negative(*d, "failure_detection", 3600, " seconds",
                                                "give seconds, e.g. 5 (the heartbeat timeout)");
    if (auto m = net.find("model")) {
        const auto model = network_model_from(m->as_string());
        if (!model)
            m->fail(fmt::format("unknown network model \"{}\"", m->as_string()),
                    "use \"fair\" (max-min fair sharing between the flows in flight, the "
                    "default) or \"fifo\" (one message at a time per uplink and downlink)");
        c.network_model = *model;
    }
    c.default_link.latency =
        read_non_negative(net.at("latency"), "latency", kMaxLatency, " seconds", kLatencyFix);
    c.default_link.bandwidth = read_bandwidth(net.at("bandwidth"), "bandwidth");

    const Node defaults = root.at("defaults");
    if (defaults.has("fail_at"))
        defaults.at("fail_at").fail("a failure time in \"defaults\" would stop every peer",
                                    "set \"fail_at\" per peer under \"peers\"");
    for (const char* churn : {"join_at", "leave_at", "rejoin_at"})
        if (defaults.has(churn))
            defaults.at(churn).fail(
                fmt::format("\"{}\" in \"defaults\" would apply to every peer", churn),
                fmt::format("set \"{}\" per peer under \"peers\" (docs/operations/elastic.md)",
                            churn));
    defaults.expect_object({"base_time", "factor", "jitter", "slow", "uplink", "downlink"});
    defaults.at("base_time");  // required: a missing key is an error here, not a silent 0
    PeerSpec base;
    base.uplink = base.downlink = c.default_link.bandwidth;
    parse_patch(defaults).apply(base);
    check_step_time(base, defaults, "the default");
    c.peers.assign(static_cast<std::size_t>(n), base);

    if (auto peers = root.find("peers")) parse_peers(*peers, c.peers);
    if (auto links = net.find("links")) parse_links(*links, n, c.default_link, c.links);
    if (auto racks = net.find("racks")) parse_racks(*racks, c);
    return c;
}

}  // namespace

const char* to_string(NetworkModel m) {
    return m == NetworkModel::fifo ? "fifo" : "fair";
}

std::optional<NetworkModel> network_model_from(std::string_view name) {
    if (name == "fair") return NetworkModel::fair;
    if (name == "fifo") return NetworkModel::fifo;
    return std::nullopt;
}

bool Cluster::has_churn() const {
    return std::any_of(peers.begin(), peers.end(), [](const PeerSpec& p) {
        return p.join_at > 0 || p.leave_at != never || p.rejoin_at != never;
    });
}

const LinkSpec& Cluster::link(int from, int to) const {
    auto it = links.find({from, to});
    return it == links.end() ? default_link : it->second;
}

Cluster parse_cluster(const json::Document& doc, int n) {
    if (n < 1) throw Error(fmt::format("parse_cluster: n must be >= 1, got {}", n));
    try {
        return parse_resolved(doc, n);
    } catch (const ConfigError& e) {
        // The generic reads of json::Node (wrong type, not an array) say what is wrong but not
        // how to fix it; point at the format description rather than leave the fix out.
        if (!e.fix().empty()) throw;
        throw ConfigError(e.file(), e.path(), e.problem(), "see docs/formats/cluster-format.md");
    }
}

Cluster load_cluster(const std::string& path, int n) {
    return parse_cluster(json::load_file(path), n);
}

Cluster homogeneous_cluster(int n, Time base_time, Time latency, double bandwidth) {
    if (n < 1 || !(base_time > 0.0) || !(latency >= 0.0) || !(bandwidth > 0.0))
        throw Error(
            fmt::format("homogeneous_cluster: bad arguments n = {}, base_time = {}, "
                        "latency = {}, bandwidth = {}",
                        n, base_time, latency, bandwidth));
    Cluster c;
    c.default_link = {latency, bandwidth};
    PeerSpec p;
    p.base_time = base_time;
    p.uplink = p.downlink = bandwidth;
    c.peers.assign(static_cast<std::size_t>(n), p);
    return c;
}

}  // namespace gossamer
