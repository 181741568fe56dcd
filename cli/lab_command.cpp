// gossamer lab check|up|down|clean: the network-namespace lab (docs/operations/lab.md). Parses
// flags, converts a cluster file's network section, calls gossamer::lab and prints. This file
// holds what the commands share and `check`; up, down and clean are in lab_hold_command.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>

#include "commands.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/lab/check.hpp"
#include "gossamer/lab/from_cluster.hpp"
#include "gossamer/lab/lab.hpp"
#include "gossamer/lab/system.hpp"
#include "lab_commands.hpp"

namespace gossamer::cli {
namespace {

// The peer count of a cluster file: `peers` when given, else the file's "n".
int cluster_peer_count(const std::string& path, std::optional<int> peers) {
    if (peers) return *peers;
    const auto doc = json::load_file(path);
    const auto& root = *doc.root;
    if (root.is_object() && root.contains("n") && root["n"].is_number_integer()) {
        const auto n = root["n"].get<std::int64_t>();
        if (n >= 1 && n <= lab::kMaxPeers) return static_cast<int>(n);
    }
    throw UsageError(fmt::format("--cluster {}: the file gives no \"n\" (1..{}); give --peers N",
                                 path, lab::kMaxPeers));
}

const char* kLabHelp = R"(usage: gossamer lab COMMAND [options]

The network-namespace lab (docs/operations/lab.md): one namespace per peer behind a bridge, links shaped by
the kernel (htb), everything removed when its holder ends. Needs root and iproute2.

commands:
  check   every peer sends to the next at once; the rate each reaches (kernel counters) vs its cap
  up      build a lab and hold it until Ctrl-C, SIGTERM, --for or 'gossamer lab down'
  down    end a lab held by another process (JOB: gsmS as 'up' printed it)
  clean   remove what labs whose holder died left behind (never a live one)
)";

double mbit(double bits) {
    return bits / 1e6;
}

}  // namespace

const std::vector<OptionSpec> kSpecOptions = {
    {"peers", "N", "number of peers (default 8; with --cluster, the file's \"n\")"},
    {"rate", "RATE", "uplink and downlink cap of every peer, e.g. 100mbit, 1gbit (default 1gbit)"},
    {"cluster", "FILE",
     "caps from a cluster file's network section (uplink, downlink, links[].bandwidth)"}};

SpecChoice spec_from_args(const ParsedArgs& a) {
    SpecChoice c;
    const auto cluster = a.value("cluster");
    if (cluster && a.value("rate"))
        throw UsageError("--rate and --cluster: give one (the cluster file sets every cap)");
    std::optional<int> peers;
    if (a.value("peers")) peers = static_cast<int>(a.integer("peers", 8, 1, lab::kMaxPeers));
    if (cluster) {
        const int n = cluster_peer_count(*cluster, peers);
        const auto cl = load_cluster(*cluster, n);
        c.spec = lab::spec_from_cluster(cl);
        c.latency = lab::cluster_has_latency(cl);
        c.source = *cluster;
    } else {
        const auto text = a.value("rate").value_or("1gbit");
        const auto rate = lab::parse_rate(text);
        if (!rate)
            throw UsageError(
                fmt::format("--rate: \"{}\" is not a rate; write e.g. 100mbit, 1gbit "
                            "or 2.5e8 (bits/s)",
                            text));
        c.spec.peers.assign(static_cast<std::size_t>(peers.value_or(8)), {*rate, *rate});
        c.source = fmt::format("every peer capped at {}", lab::format_rate(*rate));
    }
    lab::validate(c.spec, cluster ? "--cluster " + *cluster : "--peers");
    return c;
}

void require_lab(const std::string& command) {
    if (const auto missing = lab::missing_requirements(); !missing.empty())
        throw UsageError(fmt::format("{}: {}", command, missing));
}

int lab_check(const std::vector<std::string>& args) {
    auto options = kSpecOptions;
    options.push_back({"seconds", "S", "how long every peer sends (default 3, at most 60)"});
    options.push_back({"json", "", "print one JSON object instead of the table"});
    ArgParser p("gossamer lab check", "[options]",
                "Builds a lab, has every peer send to its ring successor over TCP at once, and "
                "reads the rate each peer's uplink qdisc carried over the middle of the run from "
                "the kernel's own counters (tc -s), against its cap. Says whether the veths carry "
                "the caps on this machine; the lab is removed at the end.",
                options, 0);
    const auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    const double seconds = a.number("seconds", 3.0);
    if (!(seconds >= 0.5 && seconds <= 60))
        throw UsageError(fmt::format("--seconds {}: give 0.5 to 60", seconds));
    const auto choice = spec_from_args(a);
    if (choice.spec.peers.size() < 2)
        throw UsageError("--peers 1: a check needs at least 2 peers (each sends to the next)");
    require_lab("gossamer lab check");
    const auto r = lab::run_check(choice.spec, seconds);
    if (a.flag("json")) {
        json::Json peers = json::Json::array();
        for (const auto& pr : r.peers)
            peers.push_back({{"peer", pr.peer},
                             {"cap_bits_per_s", pr.cap},
                             {"reached_bits_per_s", pr.measured},
                             {"received_bits_per_s", pr.received},
                             {"error", pr.error}});
        std::cout << json::Json{{"job", r.job},
                                {"window_s", r.window_s},
                                {"peers", peers},
                                {"total_bits_per_s", r.total},
                                {"carries", r.carries}}
                         .dump(2)
                  << "\n";
        return 0;
    }
    std::cout << fmt::format(
        "lab check: {} peers ({}), each sending to the next at once for {} s (job {})\n",
        r.peers.size(), choice.source, seconds, r.job);
    std::cout << fmt::format("{:>4}  {:>14}  {:>14}  {:>7}  {:>15}\n", "peer", "cap [Mbit/s]",
                             "sent [Mbit/s]", "of cap", "recv [Mbit/s]");
    double lowest = -1;
    for (const auto& pr : r.peers) {
        const std::string share =
            pr.cap > 0 ? fmt::format("{:.0f}%", 100.0 * pr.measured / pr.cap) : "-";
        std::cout << fmt::format("{:>4}  {:>14}  {:>14.1f}  {:>7}  {:>15.1f}{}\n", pr.peer,
                                 pr.cap > 0 ? fmt::format("{:.1f}", mbit(pr.cap)) : "unlimited",
                                 mbit(pr.measured), share, mbit(pr.received),
                                 pr.error.empty() ? "" : "  " + pr.error);
        if (lowest < 0 || pr.measured < lowest) lowest = pr.measured;
    }
    std::cout << fmt::format("total {:.1f} Mbit/s over a {:.2f} s window (the qdiscs' counters)\n",
                             mbit(r.total), r.window_s);
    if (r.carries)
        std::cout << "verdict: the veths carry these caps here (every peer reached >= 90% of its "
                     "cap at once)\n";
    else
        std::cout << fmt::format(
            "verdict: the veths cannot carry these caps here; the slowest peer reached {:.1f} "
            "Mbit/s: use caps of at most that per peer for runs on this machine\n",
            mbit(std::max(lowest, 0.0)));
    return 0;
}

int run_lab(const std::vector<std::string>& args) {
    if (args.empty())  // usage errors go to stderr as one line, exit 2 (docs/operations/cli.md)
        throw UsageError(
            "gossamer lab: missing command; use check, up, down or clean (see 'gossamer lab "
            "--help')");
    if (args[0] == "--help" || args[0] == "-h" || args[0] == "help")
        return std::cout << kLabHelp, 0;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    const std::string& cmd = args[0];
    if (cmd == "check") return lab_check(rest);
    if (cmd == "up") return lab_up(rest);
    if (cmd == "down") return lab_down(rest);
    if (cmd == "clean") return lab_clean(rest);
    throw UsageError(
        fmt::format("gossamer lab: unknown command '{}'; use check, up, down or clean", cmd));
}

}  // namespace gossamer::cli
