// Peers as hosts of a network-namespace lab (lab_hosts.hpp).
#include "lab_hosts.hpp"

#include <fmt/format.h>

#include <fstream>

#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/lab/lab.hpp"
#include "gossamer/lab/system.hpp"
#include "gossamer/launch/local_ports.hpp"

namespace gossamer::launch {
namespace {

namespace fs = std::filesystem;

// The largest bandwidth a cluster file takes (docs/formats/cluster-format.md, "Ranges"): a message
// of 1 GB is paced by 1 us.
constexpr double kNoPacing = 1e15;

json::Json read_json(const std::string& path) {
    std::ifstream in(path);
    return json::Json::parse(in, nullptr, true, true);
}

std::string write_json(const fs::path& path, const json::Json& doc) {
    std::ofstream f(path);
    f << doc.dump(2) << "\n";
    if (!f) throw Error(fmt::format("cannot write {}", path.string()));
    return path.string();
}

const lab::PeerHost& host_of(const LaunchJob& job, int rank) {
    if (!job.lab || rank >= static_cast<int>(job.lab->hosts().size()))
        throw Error(fmt::format("launch: rank {} has no host in the lab", rank));
    return job.lab->hosts()[static_cast<std::size_t>(rank)];
}

}  // namespace

std::string lab_topology(const LaunchJob& job, const fs::path& dir) {
    json::Json peers = json::Json::array();
    for (int r = 0; r < job.topology.n(); ++r)
        peers.push_back({{"host", host_of(job, r).address},
                         {"port", job.topology.peers[static_cast<std::size_t>(r)].port}});
    auto doc = read_json(job.topology_path);
    doc.erase("hosts");  // the count form's node list, if any: the lab's addresses replace it
    doc["peers"] = peers;
    return write_json(dir / "topology.json", doc);
}

std::string lab_cluster(const LaunchJob& job, const fs::path& dir) {
    auto doc = read_json(*job.cluster_path);
    auto lift = [](json::Json& o, const char* key) {
        if (o.is_object() && o.contains(key)) o[key] = kNoPacing;
    };
    for (const char* key : {"uplink", "downlink"}) {
        if (doc.contains("defaults")) lift(doc["defaults"], key);
        if (doc.contains("peers") && doc["peers"].is_array())
            for (auto& p : doc["peers"]) lift(p, key);
    }
    if (doc.contains("network")) {
        auto& net = doc["network"];
        lift(net, "bandwidth");
        if (net.contains("links") && net["links"].is_array())
            for (auto& l : net["links"]) lift(l, "bandwidth");
    }
    const auto path = write_json(dir / "cluster.json", doc);
    load_cluster(path, job.topology.n());  // still a valid cluster file
    return path;
}

std::vector<std::string> lab_exec_prefix(const LaunchJob& job, int rank) {
    return lab::netns_exec(host_of(job, rank).netns);
}

std::vector<std::pair<std::string, std::string>> lab_environment(const LaunchJob& job, int rank) {
    return {{"UCX_TLS", "tcp,self"},
            {"UCX_NET_DEVICES", host_of(job, rank).device},
            {"GOSSAMER_LOCAL_PEERS", std::to_string(job.topology.n())}};
}

DdpRendezvous ddp_rendezvous(const LaunchJob& job, int rank) {
    // A fresh namespace has no listener, so any fixed port is free there; on this machine's
    // addresses the port is one free now (a race with other programs is possible, as for
    // torchrun's own choice).
    constexpr int kLabPort = 29500;
    if (job.lab) return {host_of(job, 0).address, kLabPort, host_of(job, rank).device};
    const std::string host = job.topology.peers.at(0).host;
    return {host, free_ports(host, 1).at(0), ""};
}

}  // namespace gossamer::launch
