// Rank, size and rendezvous from the flags and the launchers' variables (launcher.hpp). The
// rendezvous is tied to the launcher that gave the rank: a rank from --rank never takes rank 0's
// host from a Slurm or torchrun variable that merely happens to be set in the shell.
#include "gossamer/bootstrap/launcher.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "gossamer/core/error.hpp"

namespace gossamer::bootstrap {
namespace {

// One launcher's variables: rank, size (first set wins) and the peers on this host.
struct Launcher {
    const char* rank;
    std::vector<const char*> size;
    const char* local;  // nullptr: see launcher_local_size (Slurm's is a list)
    const char* name;   // for messages
};

const std::vector<Launcher>& launchers() {
    static const std::vector<Launcher> all = {
        {"OMPI_COMM_WORLD_RANK", {"OMPI_COMM_WORLD_SIZE"}, "OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun"},
        {"PMI_RANK", {"PMI_SIZE"}, "MPI_LOCALNRANKS", "the PMI launcher"},
        {"SLURM_PROCID", {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, nullptr, "srun"},
        {"RANK", {"WORLD_SIZE"}, "LOCAL_WORLD_SIZE", "torchrun"},
    };
    return all;
}

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
}

std::optional<long long> integer(std::string_view text) {
    long long v = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return std::optional<long long>(v);
}

// The launcher whose rank variable is set (RANK counts only beside MASTER_ADDR: a bare RANK is
// too common a name to trust).
const Launcher* active_launcher() {
    for (const auto& l : launchers()) {
        if (!env(l.rank)) continue;
        if (std::string_view(l.rank) == "RANK" && !env("MASTER_ADDR")) continue;
        return &l;
    }
    return nullptr;
}

int parse_rank(const std::string& source, const std::string& text, int n) {
    auto value = integer(text);
    if (!value)
        throw ConfigError("", source, "'" + text + "' is not an integer rank",
                          "set it to a rank from 0 to " + std::to_string(n - 1));
    if (*value < 0 || *value >= n)
        throw ConfigError("", source,
                          fmt::format("rank {} is out of range for {} peers in the topology file "
                                      "(ranks run from 0 to {})",
                                      text, n, n - 1),
                          "start as many processes as the topology file has peers");
    return static_cast<int>(*value);
}

void check_size(const Launcher& l, int n) {
    for (const char* var : l.size) {
        auto text = env(var);
        if (!text) continue;
        auto size = integer(*text);
        if (!size || *size <= 0)
            throw ConfigError("", var, fmt::format("'{}' is not a number of peers", *text),
                              fmt::format("check how {} was started", l.name));
        if (*size != n)
            throw ConfigError(
                "", var,
                fmt::format("{} started {} peer{} but the topology file has {}", l.name, *size,
                            *size == 1 ? "" : "s", n),
                fmt::format("start {} peers (srun -n {}, mpirun -np {}) or use a topology file "
                            "for {}",
                            n, n, n, *size));
        return;
    }
}

// Slurm's tasks per node: "2(x3),1" is 2, 2, 2, 1; `node` indexes it.
std::optional<int> slurm_tasks_on(const std::string& list, long long node) {
    long long index = 0;
    std::size_t start = 0;
    while (start <= list.size()) {
        auto comma = list.find(',', start);
        std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
        long long repeat = 1;
        auto paren = item.find("(x");
        if (paren != std::string::npos) {
            if (item.back() != ')') return std::nullopt;
            const long long r =
                integer(std::string_view(item).substr(paren + 2, item.size() - paren - 3))
                    .value_or(0);
            if (r <= 0) return std::nullopt;
            repeat = r;
            item.resize(paren);
        }
        const long long tasks = integer(item).value_or(0);
        if (tasks <= 0 || tasks >= (1 << 30)) return std::nullopt;
        if (node < index + repeat) return static_cast<int>(tasks);
        index += repeat;
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return std::nullopt;
}

int port_value(const std::string& text, const std::string& source) {
    auto port = integer(text);
    if (!port || *port < 1 || *port > 65535)
        throw ConfigError("", source, fmt::format("'{}' is not a port (1 to 65535)", text),
                          "give rank 0's TCP port");
    return static_cast<int>(*port);
}

}  // namespace

Endpoint parse_host_port(const std::string& text, const std::string& source, int default_port) {
    auto bad = [&](const std::string& why) {
        return ConfigError("", source, fmt::format("'{}' {}", text, why),
                           "give rank 0's address as HOST or HOST:PORT ([V6]:PORT for IPv6)");
    };
    Endpoint e{text, default_port};
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string::npos) throw bad("has a '[' without ']'");
        e.host = text.substr(1, close - 1);
        if (close + 1 < text.size()) {
            if (text[close + 1] != ':') throw bad("has text after ']' that is not :PORT");
            e.port = port_value(text.substr(close + 2), source);
        }
    } else if (auto colon = text.rfind(':'); colon != std::string::npos) {
        if (text.find(':') != colon) throw bad("looks like an IPv6 address; write it as [V6]:PORT");
        e.host = text.substr(0, colon);
        e.port = port_value(text.substr(colon + 1), source);
    }
    if (e.host.empty()) throw bad("names no host");
    if (e.host.size() > 255) throw bad("has a host name longer than 255 bytes");
    return e;
}

std::vector<Endpoint> rendezvous_peers(const Endpoint& rendezvous, int rank, int n,
                                       const std::optional<std::string>& address) {
    std::vector<Endpoint> peers(static_cast<std::size_t>(n));
    peers[0] = rendezvous;
    const std::string bind = address.value_or("0.0.0.0");
    auto& self = peers[static_cast<std::size_t>(rank)];
    self = {bind, rank == 0 ? rendezvous.port : 0};
    return peers;
}

std::optional<int> launcher_local_size() {
    const Launcher* l = active_launcher();
    if (!l) return std::nullopt;
    if (l->local) {
        auto text = env(l->local);
        auto v = text ? integer(*text) : std::nullopt;
        if (v && *v > 0 && *v < (1 << 30)) return static_cast<int>(*v);
        return std::nullopt;
    }
    const long long node = integer(env("SLURM_NODEID").value_or("")).value_or(-1);
    if (node < 0) return std::nullopt;
    for (const char* var : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
        if (auto list = env(var)) return slurm_tasks_on(*list, node);
    return std::nullopt;
}

Launch discover_launch(const LaunchRequest& request, int n) {
    if (n <= 0) throw ConfigError("", "--rank", "the topology has no peers", "");
    Launch out;
    const Launcher* from = nullptr;
    if (request.rank) {
        out.rank = parse_rank("--rank", std::to_string(*request.rank), n);
        out.rank_source = "--rank";
    } else {
        from = active_launcher();
        if (!from)
            throw ConfigError(
                "", "--rank", "no rank given and none found in the environment",
                "pass --rank R, or start the peers with mpirun (OMPI_COMM_WORLD_RANK), a PMI "
                "launcher (PMI_RANK), srun (SLURM_PROCID) or torchrun (RANK with MASTER_ADDR)");
        check_size(*from, n);  // before the rank: every process then gives the same line
        out.rank = parse_rank(from->rank, *env(from->rank), n);
        out.rank_source = from->rank;
        out.local_size = launcher_local_size();
    }

    if (request.address) {
        const auto& a = *request.address;
        if (a.empty() || a.size() > 255 || a.find_first_of(" \t[]") != std::string::npos)
            throw ConfigError("", "--address", fmt::format("'{}' is not a host name or address", a),
                              "give an address of this host, e.g. 10.0.0.2");
    }
    if (!request.count_only) {
        const char* flag = request.rendezvous        ? "--rendezvous"
                           : request.rendezvous_port ? "--rendezvous-port"
                           : request.address         ? "--address"
                                                     : nullptr;
        if (flag)
            throw ConfigError("", flag,
                              "the topology file lists every peer's host and port, so rank 0 "
                              "listens where it says",
                              "drop the flag, or give the topology file only a count "
                              "(\"peers\": {\"count\": N})");
        return out;
    }

    // The port: the flag, the variable, then whatever names the host, then the default.
    std::optional<int> port = request.rendezvous_port;
    if (port && (*port < 1 || *port > 65535))
        throw ConfigError("", "--rendezvous-port", fmt::format("{} is not a port", *port),
                          "give a TCP port from 1 to 65535");
    if (!port)
        if (auto text = env(kRendezvousPortVariable))
            port = port_value(*text, kRendezvousPortVariable);
    auto pick = [&](const std::string& text, const std::string& source, int fallback) {
        out.rendezvous = parse_host_port(text, source, fallback);
        if (port) out.rendezvous->port = *port;
        out.rendezvous_source = source;
    };
    if (request.rendezvous) {
        pick(*request.rendezvous, "--rendezvous", kDefaultRendezvousPort);
    } else if (auto text = env(kRendezvousVariable)) {
        pick(*text, kRendezvousVariable, kDefaultRendezvousPort);
    } else if (!from) {
        // --rank without a rendezvous: the count form's defaults (127.0.0.1 from port 29500).
        if (request.address)
            throw ConfigError("", "--address",
                              "without a rendezvous every peer listens at the count form's "
                              "default address (127.0.0.1, ports from 29500)",
                              "name rank 0 with --rendezvous HOST[:PORT] or GOSSAMER_RENDEZVOUS, "
                              "or drop --address");
    } else if (auto master = env("MASTER_ADDR")) {
        int fallback = kDefaultRendezvousPort;
        if (auto mp = env("MASTER_PORT")) {
            fallback = port_value(*mp, "MASTER_PORT");
            // torchrun's agent serves its own store on MASTER_PORT; Gossamer takes the next.
            if (env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True")
                fallback = fallback == 65535 ? 65534 : fallback + 1;
        }
        pick(*master, "MASTER_ADDR", fallback);
    } else if (std::string_view(from->rank) == "SLURM_PROCID") {
        for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
            auto list = env(var);
            if (!list) continue;
            auto hosts = expand_nodelist(*list, var);
            pick(hosts.front(), fmt::format("the first host of {}", var), kDefaultRendezvousPort);
            break;
        }
        if (!out.rendezvous)
            throw ConfigError("", "SLURM_PROCID",
                              "srun set no node list (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST), "
                              "so rank 0's host is unknown",
                              "pass --rendezvous HOST[:PORT] or set GOSSAMER_RENDEZVOUS");
    } else if (out.local_size && *out.local_size == n) {
        pick("127.0.0.1", fmt::format("{} (every rank on this host)", from->name),
             kDefaultRendezvousPort);
    } else {
        throw ConfigError(
            "", from->rank,
            fmt::format("{} started the peers on several hosts (or did not say how many are "
                        "on this one) and does not name rank 0's host",
                        from->name),
            "pass --rendezvous HOST[:PORT] or export GOSSAMER_RENDEZVOUS (mpirun -x "
            "GOSSAMER_RENDEZVOUS=HOST) with the host of rank 0");
    }
    return out;
}

}  // namespace gossamer::bootstrap
