// gossamer lab check|up|down|clean: the network-namespace lab (docs/operations/lab.md). Parses
// flags, converts a cluster file's network section, calls gossamer::lab and prints.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/lab/check.hpp"
#include "gossamer/lab/from_cluster.hpp"
#include "gossamer/lab/lab.hpp"
#include "gossamer/lab/system.hpp"

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

const std::vector<OptionSpec> kSpecOptions = {
    {"peers", "N", "number of peers (default 8; with --cluster, the file's \"n\")"},
    {"rate", "RATE", "uplink and downlink cap of every peer, e.g. 100mbit, 1gbit (default 1gbit)"},
    {"cluster", "FILE",
     "caps from a cluster file's network section (uplink, downlink, links[].bandwidth)"}};

struct SpecChoice {
    lab::LabSpec spec;
    std::string source;  // for messages: "8 peers at 1 Gbit/s" or the file
    bool latency = false;
};

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

double mbit(double bits) {
    return bits / 1e6;
}

int check(const std::vector<std::string>& args) {
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

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop(int) {
    g_stop = 1;
}

int up(const std::vector<std::string>& args) {
    auto options = kSpecOptions;
    options.push_back({"for", "SECONDS",
                       "end the lab after this long (default: hold until "
                       "Ctrl-C, SIGTERM or 'gossamer lab down')"});
    ArgParser p("gossamer lab up", "[options]",
                "Builds a lab and holds it in the foreground: prints each peer's namespace, veth "
                "and address, then waits. Ctrl-C, SIGTERM, --for or 'gossamer lab down JOB' "
                "removes it; so does killing this process (its holder child sees it die).",
                options, 0);
    const auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    const double hold = a.number("for", 0.0);
    if (a.value("for") && !(hold > 0 && hold <= 30 * 86400))
        throw UsageError(fmt::format("--for {}: give seconds in (0, 2592000]", hold));
    const auto choice = spec_from_args(a);
    require_lab("gossamer lab up");
    struct sigaction sa {};
    sa.sa_handler = on_stop;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    auto lab = lab::Lab::create(choice.spec);
    std::cout << fmt::format("lab {}: {} peers in {} ({}), holder pid {}\n", lab.job(),
                             lab.hosts().size(), lab::subnet(lab.slot()), choice.source,
                             lab.holder_pid());
    if (choice.latency)
        std::cout << "latency: no netem in this kernel; the peers emulate the cluster file's "
                     "latencies\n";
    std::cout << fmt::format("{:>4}  {:<14} {:<10} {:<15} {:>14} {:>14}\n", "peer", "namespace",
                             "device", "address", "uplink", "downlink");
    for (std::size_t i = 0; i < lab.hosts().size(); ++i) {
        const auto& h = lab.hosts()[i];
        const auto& caps = choice.spec.peers[i];
        std::cout << fmt::format("{:>4}  {:<14} {:<10} {:<15} {:>14} {:>14}\n", i, h.netns,
                                 h.device, h.address, lab::format_rate(caps.uplink),
                                 lab::format_rate(caps.downlink));
    }
    for (const auto& l : choice.spec.links)
        std::cout << fmt::format("link {} -> {}: {}\n", l.from, l.to,
                                 lab::format_rate(l.bits_per_s));
    // A count-only topology file (examples/topologies/count4.json): rank 0 is the rendezvous.
    const auto& last = lab.hosts().back();
    std::cout << fmt::format(
        "run rank {} of a count-only job: ip netns exec {} env UCX_TLS=tcp,self "
        "UCX_NET_DEVICES={} gossamer peer --rendezvous {} --address {} --rank {} ...\n",
        lab.hosts().size() - 1, last.netns, last.device, lab.hosts()[0].address, last.address,
        lab.hosts().size() - 1);
    std::cout << fmt::format("holding; Ctrl-C or 'gossamer lab down {}' removes it\n", lab.job())
              << std::flush;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(hold);
    bool holder_died = false;
    while (!g_stop && (hold <= 0 || std::chrono::steady_clock::now() < end)) {
        if (!lab.holder_alive()) {
            holder_died = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    lab.stop();
    std::cout << fmt::format(
        "lab {} removed{}\n", lab.job(),
        holder_died ? " (its holder ended: 'gossamer lab down' or a kill)" : "");
    return 0;
}

void print_report(const lab::CleanReport& r) {
    for (const auto& n : r.removed) std::cout << "removed " << n << "\n";
    for (const auto& j : r.live)
        std::cout << "left " << j << " alone: its holder is alive ('gossamer lab down " << j
                  << "' ends it)\n";
    if (r.removed.empty() && r.live.empty()) std::cout << "nothing to remove\n";
}

int down(const std::vector<std::string>& args) {
    ArgParser p("gossamer lab down", "JOB",
                "Ends a lab held by another process: SIGTERM to its holder, which removes every "
                "namespace, veth and qdisc of the job; then removes anything left.",
                {}, 1);
    const auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    const auto slot = lab::parse_job(a.positional[0]);
    if (!slot)
        throw UsageError(
            fmt::format("gossamer lab down: \"{}\" is not a lab job; give one like "
                        "gsm3, as 'gossamer lab up' printed it",
                        a.positional[0]));
    require_lab("gossamer lab down");
    print_report(lab::take_down(*slot));
    return 0;
}

int clean(const std::vector<std::string>& args) {
    ArgParser p("gossamer lab clean", "",
                "Removes every lab namespace (names starting gsm) whose holder is dead, with its "
                "veths and qdiscs; labs whose holder lives are listed and left alone.",
                {}, 0);
    const auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    require_lab("gossamer lab clean");
    print_report(lab::clean_leftovers());
    return 0;
}

}  // namespace

int run_lab(const std::vector<std::string>& args) {
    if (args.empty())  // usage errors go to stderr as one line, exit 2 (docs/operations/cli.md)
        throw UsageError(
            "gossamer lab: missing command; use check, up, down or clean (see 'gossamer lab "
            "--help')");
    if (args[0] == "--help" || args[0] == "-h" || args[0] == "help")
        return std::cout << kLabHelp, 0;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    const std::string& cmd = args[0];
    if (cmd == "check") return check(rest);
    if (cmd == "up") return up(rest);
    if (cmd == "down") return down(rest);
    if (cmd == "clean") return clean(rest);
    throw UsageError(
        fmt::format("gossamer lab: unknown command '{}'; use check, up, down or clean", cmd));
}

}  // namespace gossamer::cli
