// gossamer lab up|down|clean: hold a lab in the foreground, end one held by another process,
// remove what dead holders left (docs/operations/lab.md).
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "gossamer/lab/lab.hpp"
#include "gossamer/lab/system.hpp"
#include "lab_commands.hpp"

namespace gossamer::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop(int) {
    g_stop = 1;
}

void print_report(const lab::CleanReport& r) {
    for (const auto& n : r.removed) std::cout << "removed " << n << "\n";
    for (const auto& j : r.live)
        std::cout << "left " << j << " alone: its holder is alive ('gossamer lab down " << j
                  << "' ends it)\n";
    if (r.removed.empty() && r.live.empty()) std::cout << "nothing to remove\n";
}

}  // namespace

int lab_up(const std::vector<std::string>& args) {
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

int lab_down(const std::vector<std::string>& args) {
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

int lab_clean(const std::vector<std::string>& args) {
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

}  // namespace gossamer::cli
