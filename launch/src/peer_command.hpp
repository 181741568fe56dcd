#pragma once
// The command line and environment of one peer process of gossamer launch (docs/operations/cli.md):
// a `gossamer peer` (or a --script peer, or a torch row's script), in the lab behind its
// namespace's `ip netns exec`. Private to launch/.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "churn.hpp"
#include "gossamer/launch/launch.hpp"
#include "lab_hosts.hpp"

namespace gossamer::launch {

/// What every peer process of one algorithm shares.
struct PeerSetup {
    const LaunchJob& job;
    std::string algo;
    std::string topology{}, config{}, exe{};  ///< the files and the program the peers get
    std::string job_start{};                  ///< --job-start: unix seconds
    std::optional<std::string> cluster{}, script{};
    std::vector<std::pair<std::string, std::string>> env{};
    std::uint64_t job_id = 0;
    std::map<std::string, LaunchJob::Resume>::const_iterator resume{};
    bool torch_row = false;  ///< ddp or diloco: a torch.distributed script (job.torch_scripts)
    DdpRendezvous master{};
    const ChurnPlan* plan = nullptr;
    int n = 0;
};

/// Rank r's command line and environment; `join`: it enters the running job (--join).
std::pair<std::vector<std::string>, std::vector<std::pair<std::string, std::string>>> peer_command(
    const PeerSetup& s, int r, bool join);

}  // namespace gossamer::launch
